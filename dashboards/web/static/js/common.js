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

// Swap the live panels for freshly rendered ones, keeping behaviour bound.
SW.replacePanels = (container, html, after) => {
  container.innerHTML = html;
  SW.applyGauges(container);
  if (after) after(container);
};

// Subscribe to a server-sent-events stream and show its state in #live.
SW.live = (url, handlers) => {
  const badge = document.getElementById("live");
  const set = (text, cls) => { if (badge) { badge.textContent = text; badge.className = "live " + cls; } };
  const source = new EventSource(url);
  source.addEventListener("open", () => set("live", "on"));
  source.addEventListener("error", () => set("reconnecting…", "off"));
  source.addEventListener("logout", () => { source.close(); window.location.reload(); });
  Object.entries(handlers).forEach(([name, fn]) => {
    source.addEventListener(name, (event) => { set("live", "on"); fn(event.data); });
  });
  return source;
};

// Format epoch milliseconds in the site's time zone.
SW.timeFormat = (timeZone, withDate) => new Intl.DateTimeFormat(undefined, withDate
  ? { timeZone, month: "short", day: "numeric" }
  : { timeZone, hour: "numeric", minute: "2-digit" });

window.SW = SW;
