// Homeowner dashboard: Chart.js charts of 24 h / 7 days / season, and live updates.
"use strict";

(() => {
  const panels = document.getElementById("panels");
  const siteId = panels.dataset.site;
  const charts = {};
  let view = null;
  let currentRange = "24h";
  const COLORS = ["#1f6feb", "#d9480f", "#2f9e44", "#7048e8", "#868e96"];
  const MARK_COLORS = { "Alarm": "#c92a2a", "Pump on": "#e67700", "Pump off": "#2b8a3e" };

  SW.applyGauges(panels);
  const rebind = (root) => SW.bindActions(root, refreshPanels);
  rebind(panels);

  async function refreshPanels() {
    // After an action, take the freshly rendered panels from the page itself.
    const html = await fetch(window.location.pathname, { credentials: "same-origin" }).then((r) => r.text());
    const doc = new DOMParser().parseFromString(html, "text/html");
    const fresh = doc.getElementById("panels");
    if (fresh) SW.replacePanels(panels, fresh.innerHTML, rebind);
  }

  function xAxis(range, tz) {
    const fmt = SW.timeFormat(tz, range !== "24h");
    return { type: "linear", ticks: { maxTicksLimit: 7, callback: (v) => fmt.format(new Date(v)) } };
  }

  // A site with less history than the range: start the axis at its first reading.
  function firstX() {
    let first = view.end_ms;
    Object.values(view.charts).forEach((c) => {
      (c.series || []).forEach((s) => { if (s.points.length) first = Math.min(first, s.points[0][0]); });
      if (c.bars && c.bars.length) first = Math.min(first, c.bars[0][0]);
    });
    return first < view.end_ms ? Math.max(view.start_ms, first) : view.start_ms;
  }

  function lineDatasets(chart) {
    const sets = chart.series.map((s, i) => ({
      label: s.label, key: s.key, data: s.points.map(([x, y]) => ({ x, y })),
      borderColor: COLORS[i % COLORS.length], backgroundColor: COLORS[i % COLORS.length],
      borderWidth: 1.5, pointRadius: s.points.length < 60 ? 2 : 0, tension: 0.1,
    }));
    (chart.marks || []).forEach((m) => sets.push({
      label: m.label, key: "mark", data: [{ x: view.start_ms, y: m.value }, { x: view.end_ms, y: m.value }],
      borderColor: MARK_COLORS[m.label] || "#999", borderDash: [6, 4], borderWidth: 1, pointRadius: 0,
    }));
    return sets;
  }

  function draw(name, chart) {
    const canvas = document.getElementById(`chart-${name}`);
    if (!canvas) return;
    if (charts[name]) charts[name].destroy();
    const bars = name === "cycles";
    const tz = view.timezone;
    const tip = SW.timeFormat(tz, false);
    const dateTip = SW.timeFormat(tz, true);
    charts[name] = new Chart(canvas, {
      type: bars ? "bar" : "line",
      data: bars
        ? { datasets: [{ label: `Cycles per ${chart.bucket}`, data: chart.bars.map(([x, y]) => ({ x, y })), backgroundColor: "#1f6feb",
            barPercentage: 1, categoryPercentage: 1, maxBarThickness: 24 }] }
        : { datasets: lineDatasets(chart) },
      options: {
        animation: false, responsive: true, maintainAspectRatio: false, parsing: true, normalized: true,
        interaction: { mode: "nearest", intersect: false },
        scales: {
          x: { ...xAxis(view.range, tz), min: firstX(), max: view.end_ms, offset: false },
          y: { title: { display: true, text: chart.unit }, beginAtZero: bars || name === "level",
               min: name === "flow" ? 0 : undefined },
        },
        plugins: {
          legend: { display: !bars, labels: { boxWidth: 12 } },
          tooltip: { callbacks: { title: (items) => items.length
            ? `${dateTip.format(new Date(items[0].parsed.x))} ${tip.format(new Date(items[0].parsed.x))}` : "" } },
        },
      },
    });
    canvas.dataset.points = String(bars ? chart.bars.length
      : chart.series.reduce((n, s) => n + s.points.length, 0));
  }

  async function load(range) {
    currentRange = range;
    document.querySelectorAll(".tab").forEach((b) => b.classList.toggle("active", b.dataset.range === range));
    const error = document.getElementById("charts-error");
    try {
      const response = await fetch(`/site/${siteId}/charts.json?range=${range}`, { credentials: "same-origin" });
      if (!response.ok) throw new Error(String(response.status));
      view = await response.json();
      error.classList.add("hidden");
    } catch (e) {
      error.classList.remove("hidden");
      return;
    }
    document.getElementById("charts-empty").classList.toggle("hidden", view.has_data);
    Object.entries(view.charts).forEach(([name, chart]) => draw(name, chart));
    document.body.dataset.chartsReady = range;
  }

  // New raw readings: append to the 24 h lines and slide the window.
  function addPoints(data) {
    if (currentRange !== "24h" || !view) return;
    const points = JSON.parse(data);
    const now = Date.now();
    view.end_ms = now; view.start_ms = now - 24 * 3600 * 1000;
    Object.values(charts).forEach((chart) => {
      let added = 0;
      chart.data.datasets.forEach((ds) => {
        const fresh = points[ds.key];
        if (fresh) { fresh.forEach(([x, y]) => ds.data.push({ x, y })); added += fresh.length; }
        if (ds.key === "mark") { ds.data[0].x = view.start_ms; ds.data[1].x = view.end_ms; }
        while (ds.data.length && ds.data[0].x < view.start_ms) ds.data.shift();
      });
      if (chart.options.scales.x) { chart.options.scales.x.min = firstX(); chart.options.scales.x.max = view.end_ms; }
      chart.update("none");
      const canvas = chart.canvas;
      canvas.dataset.points = String(Number(canvas.dataset.points || 0) + added);
    });
    document.getElementById("charts-empty").classList.add("hidden");
  }

  document.querySelectorAll(".tab").forEach((b) => b.addEventListener("click", () => load(b.dataset.range)));
  load("24h");
  SW.live(`/site/${siteId}/events`, {
    panels: (html) => SW.replacePanels(panels, html, rebind),
    points: addPoints,
  });
})();
