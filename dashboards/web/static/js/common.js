// Shared page behaviour: gauges, alert action forms (fetch + CSRF header), live stream.
"use strict";

const SW = {};

SW.csrf = () => document.body.dataset.csrf || "";

// Position the pit gauge from data attributes (inline styles are barred by our CSP).
SW.applyGauges = (root) => {
  root.querySelectorAll("[data-height]").forEach((el) => { el.style.height = el.dataset.height + "%"; });
  root.querySelectorAll("[data-bottom]").forEach((el) => { el.style.bottom = el.dataset.bottom + "%"; });
};

// Alert buttons post with fetch so the page stays put; without JS the forms still work.
SW.bindActions = (root, onDone) => {
  root.querySelectorAll("form.js-action").forEach((form) => {
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const button = form.querySelector("button");
      if (button) button.disabled = true;
      try {
        const response = await fetch(form.action, {
          method: "POST",
          body: new URLSearchParams(new FormData(form)),
          headers: { "X-CSRF-Token": SW.csrf(), "Accept": "application/json" },
          credentials: "same-origin",
        });
        if (!response.ok) {
          const body = await response.json().catch(() => ({}));
          alert(body.detail || `The action failed (${response.status}). Reload the page and try again.`);
        }
        await onDone();
      } finally {
        if (button) button.disabled = false;
      }
    });
  });
};

// "12 s ago", "5 min ago", "3 h ago", "2 days ago" (the server's wording, gateway.web.sources.ago).
SW.ago = (ms) => {
  const s = Math.max(0, ms / 1000);
  if (s < 90) return `${Math.floor(s)} s ago`;
  if (s < 5400) return `${Math.floor(s / 60)} min ago`;
  if (s < 2 * 86400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} days ago`;
};

// The server's clock minus ours: "last seen" is counted on the server's clock
// (receive time), whatever this device's clock says.
SW.skew = 0;
SW.serverNow = () => Date.now() + SW.skew;

// Keep every "last seen" ticking between renders.
SW.tick = (root) => {
  root.querySelectorAll("[data-since-ms]").forEach((el) => {
    const ms = Number(el.dataset.sinceMs);
    if (ms) el.textContent = SW.ago(SW.serverNow() - ms);
  });
};

// Swap the live panels for freshly rendered ones, keeping behaviour bound, and
// announce a changed status to screen readers (a silent swap is invisible to them).
SW.replacePanels = (container, html, after) => {
  const before = SW.headline(container);
  container.innerHTML = html;
  SW.applyGauges(container);
  SW.syncClock(container);
  SW.tick(container);
  if (after) after(container);
  const now = SW.headline(container);
  const announce = document.getElementById("announce");
  if (announce && now && now !== before) announce.textContent = now;
  SW.lastRender = Date.now();
  if (SW.updateBadge) SW.updateBadge();
};

SW.headline = (root) => {
  const el = root.querySelector("[data-announce]");
  return el ? el.textContent.trim() : "";
};

SW.syncClock = (root) => {
  const el = root.querySelector("[data-now-ms]");
  if (el && Number(el.dataset.nowMs)) SW.skew = Number(el.dataset.nowMs) - Date.now();
};

SW.lastRender = Date.now();

// Subscribe to a server-sent-events stream and show in #live whether data flows:
// green "live" only while readings keep arriving; grey when the stream is up but
// nothing new came within the sensors' silence limit; orange while reconnecting.
// Every REFRESH_MS without a render the page re-renders itself (refresh()).
SW.REFRESH_MS = 60000;
SW.live = (url, handlers, refresh) => {
  const badge = document.getElementById("live");
  const panels = document.getElementById("panels");
  let connected = false;
  const set = (text, cls) => {
    if (badge && (badge.textContent !== text || badge.className !== "live " + cls)) {
      badge.textContent = text; badge.className = "live " + cls; badge.dataset.state = cls;
    }
  };
  SW.updateBadge = () => {
    if (!connected) { set("reconnecting…", "off"); return; }
    const fresh = panels && panels.querySelector("[data-last-ms][data-stale-ms]");
    const last = fresh ? Number(fresh.dataset.lastMs) : 0;
    const limit = fresh ? Number(fresh.dataset.staleMs) : 0;
    if (fresh && (!last || SW.serverNow() - last > limit)) {
      set(last ? `no new readings (newest ${SW.ago(SW.serverNow() - last)})` : "no readings yet", "idle");
    } else {
      set("live", "on");
    }
  };
  const source = new EventSource(url);
  source.addEventListener("open", () => { connected = true; SW.updateBadge(); });
  source.addEventListener("error", () => { connected = false; SW.updateBadge(); });
  source.addEventListener("logout", () => { source.close(); window.location.reload(); });
  Object.entries(handlers).forEach(([name, fn]) => {
    source.addEventListener(name, (event) => { connected = true; fn(event.data); SW.updateBadge(); });
  });
  if (panels) { SW.syncClock(panels); SW.tick(panels); }
  window.setInterval(() => {
    if (panels) SW.tick(panels);
    SW.updateBadge();
    if (refresh && Date.now() - SW.lastRender > SW.REFRESH_MS) { SW.lastRender = Date.now(); refresh(); }
  }, 5000);
  return source;
};

// Format epoch milliseconds in the site's time zone.
SW.timeFormat = (timeZone, withDate) => new Intl.DateTimeFormat(undefined, withDate
  ? { timeZone, month: "short", day: "numeric" }
  : { timeZone, hour: "numeric", minute: "2-digit" });

window.SW = SW;
