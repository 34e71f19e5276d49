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

// ---------------------------------------------------------- chart time axes
// Ticks at round local times of the site's zone: every 1, 2, 3, 6 or 12 hours,
// each midnight, every other day, each Monday, or each first of the month, so
// that no axis has more than 8 labels. A midnight tick shows the date, others the hour.
const HOUR = 3600 * 1000;
SW.TICK_STEPS_H = [1, 2, 3, 6, 12, 24, 48, 24 * 7, 24 * 14, 24 * 28];

SW.partsOf = (tz) => {
  const f = new Intl.DateTimeFormat("en-US", {
    timeZone: tz, year: "numeric", month: "numeric", day: "numeric", hour: "numeric", hourCycle: "h23",
  });
  return (ms) => {
    const o = {};
    f.formatToParts(new Date(ms)).forEach((p) => { o[p.type] = p.value; });
    return { y: Number(o.year), m: Number(o.month), d: Number(o.day), h: Number(o.hour) % 24 };
  };
};

SW.roundTicks = (min, max, tz) => {
  const parts = SW.partsOf(tz);
  const step = SW.TICK_STEPS_H.find((h) => (max - min) / HOUR / h <= 8) || 24 * 28;
  const ticks = [];
  for (let t = Math.ceil(min / HOUR) * HOUR; t <= max; t += HOUR) {
    const p = parts(t);
    if (step < 24) {
      if (p.h % step === 0) ticks.push(t);
      continue;
    }
    if (p.h !== 0) continue;
    const day = Math.floor(Date.UTC(p.y, p.m - 1, p.d) / (24 * HOUR));
    const weekday = new Date(Date.UTC(p.y, p.m - 1, p.d)).getUTCDay();
    const keep = step === 24 || (step === 48 && day % 2 === 0) || (step === 24 * 7 && weekday === 1)
      || (step === 24 * 14 && weekday === 1 && Math.floor(day / 7) % 2 === 0) || (step === 24 * 28 && p.d === 1);
    if (keep) ticks.push(t);
  }
  return ticks;
};

window.SW = SW;
