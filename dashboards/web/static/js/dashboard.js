// Homeowner dashboard: Chart.js charts of 24 h / 7 days / season, and live updates.
"use strict";

(() => {
  const panels = document.getElementById("panels");
  const siteId = panels.dataset.site;
  const charts = {};
  let view = null;
  let currentRange = "24h";
  const COLORS = ["#1860d6", "#c2410c", "#1e7b34", "#7048e8", "#495057"];
  const MARK_COLORS = { "Alarm": "#c92a2a", "Pump on": "#a84f00", "Pump off": "#1e7b34" };
  const RANGE_WORDS = { "24h": "the last 24 hours", "7d": "the last 7 days", "season": "this season" };
  const HOUR = 3600 * 1000;

  SW.applyGauges(panels);
  const rebind = (root) => SW.bindActions(root, refreshPanels);
  rebind(panels);

  async function refreshPanels() {
    // After an action (or when no update came for a while), take the freshly
    // rendered panels from the page itself.
    const html = await fetch(window.location.pathname, { credentials: "same-origin" }).then((r) => r.text());
    const doc = new DOMParser().parseFromString(html, "text/html");
    const fresh = doc.getElementById("panels");
    if (fresh) SW.replacePanels(panels, fresh.innerHTML, rebind);
  }

  // ------------------------------------------------------------ time axis
  const partsOf = SW.partsOf;
  const roundTicks = SW.roundTicks;

  function xAxis(tz) {
    const parts = partsOf(tz);
    const hour = new Intl.DateTimeFormat(undefined, { timeZone: tz, hour: "numeric" });
    const day = new Intl.DateTimeFormat(undefined, { timeZone: tz, month: "short", day: "numeric" });
    return {
      type: "linear",
      afterBuildTicks: (axis) => { axis.ticks = roundTicks(axis.min, axis.max, tz).map((value) => ({ value })); },
      ticks: {
        autoSkip: false, maxRotation: 0,
        callback: (v) => (parts(v).h === 0 ? day.format(new Date(v)) : hour.format(new Date(v))),
      },
    };
  }

  // ------------------------------------------------------------ value axis
  // Each quantity spans at least its min_span, so a quiet line's noise is not
  // stretched over the whole chart; quantities that cannot be negative start at zero.
  function yAxis(chart, values) {
    const span = chart.min_span || 0;
    let lo = values.length ? Math.min(...values) : 0;
    let hi = values.length ? Math.max(...values) : span;
    const axis = { title: { display: true, text: chart.unit }, ticks: {} };
    if (chart.integer) axis.ticks.precision = 0;
    if (chart.from_zero) {
      lo = lo < -0.05 * span ? lo : 0;
      axis.min = lo;
      axis.suggestedMax = Math.max(hi, lo + span);
    } else {
      if (hi - lo < span) { const mid = (hi + lo) / 2; lo = mid - span / 2; hi = mid + span / 2; }
      axis.suggestedMin = lo;
      axis.suggestedMax = hi;
    }
    return axis;
  }

  // ------------------------------------------------------------ findings on the time axis
  const shading = {
    id: "findings",
    beforeDatasetsDraw(chart, args, opts) {
      const spans = (opts && opts.spans) || [];
      const area = chart.chartArea;
      const x = chart.scales.x;
      if (!area || !x) return;
      const ctx = chart.ctx;
      ctx.save();
      spans.forEach((s) => {
        const x0 = Math.max(area.left, x.getPixelForValue(s.start_ms));
        const x1 = Math.min(area.right, x.getPixelForValue(s.end_ms));
        if (x1 < area.left || x0 > area.right) return;
        // Grey: readings that arrived late and were charted but not checked.
        ctx.fillStyle = s.severity === "not_evaluated" ? "rgba(90, 90, 90, 0.18)"
          : s.severity === "critical" ? "rgba(201, 42, 42, 0.13)" : "rgba(168, 79, 0, 0.13)";
        ctx.fillRect(x0, area.top, Math.max(3, x1 - x0), area.bottom - area.top);
      });
      ctx.restore();
    },
  };

  function findingsNote() {
    const note = document.getElementById("charts-findings");
    if (!note) return;
    const spans = view.findings || [];
    note.classList.toggle("hidden", spans.length === 0);
    const when = SW.timeFormat(view.timezone, true);
    const clock = SW.timeFormat(view.timezone, false);
    const at = (ms) => `${when.format(new Date(ms))} ${clock.format(new Date(ms))}`;
    note.textContent = spans.length
      ? "Shaded on the charts: " + spans.map((s) => `${s.title} (${at(s.start_ms)} to ${s.end_ms >= view.end_ms - 60000 ? "now" : at(s.end_ms)})`).join("; ")
      : "";
    note.dataset.count = String(spans.length);
  }

  // Readings that arrived behind their node's newest: stored and charted, never judged.
  function lateSpans() {
    return (view.not_evaluated || []).map((s) => ({ ...s, severity: "not_evaluated" }));
  }

  function notEvaluatedNote() {
    const note = document.getElementById("charts-not-evaluated");
    if (!note) return;
    const spans = view.not_evaluated || [];
    note.classList.toggle("hidden", spans.length === 0);
    const when = SW.timeFormat(view.timezone, true);
    const clock = SW.timeFormat(view.timezone, false);
    const at = (ms) => `${when.format(new Date(ms))} ${clock.format(new Date(ms))}`;
    const readings = (n) => `${n} reading${n === 1 ? "" : "s"}`;
    note.textContent = spans.length
      ? "Shaded grey: not evaluated. These readings arrived late, after newer ones from the same sensor; they are charted but were not checked for problems: "
        + spans.map((s) => `${s.node_id} sensor, ${at(s.start_ms)} to ${at(s.end_ms)} (${readings(s.count)})`).join("; ")
      : "";
    note.dataset.count = String(spans.length);
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
      borderColor: MARK_COLORS[m.label] || "#6c757d", borderDash: [6, 4], borderWidth: 1, pointRadius: 0,
    }));
    return sets;
  }

  // ------------------------------------------------------------ text alternative
  function caption(name) {
    const el = document.getElementById(`cap-${name}`);
    return el ? el.textContent : name;
  }

  function describe(name, chart) {
    const words = RANGE_WORDS[view.range] || "";
    if (name === "cycles") {
      const total = chart.bars.reduce((n, [, y]) => n + y, 0);
      return `${caption(name)} per ${chart.bucket} over ${words}: ${total} in all`;
    }
    const parts = chart.series.filter((s) => s.points.length).map((s) => {
      const ys = s.points.map(([, y]) => y);
      return `${s.label} from ${Math.min(...ys)} to ${Math.max(...ys)} ${chart.unit}, latest ${ys[ys.length - 1]}`;
    });
    return `${caption(name)} over ${words}: ${parts.length ? parts.join("; ") : "no readings"}`;
  }

  // Up to 48 rows, evenly picked, so the table stays readable.
  function pick(rows, n) {
    if (rows.length <= n) return rows;
    const out = [];
    for (let i = 0; i < n; i += 1) out.push(rows[Math.round((i * (rows.length - 1)) / (n - 1))]);
    return out;
  }

  function fillTable(name, chart) {
    const slot = document.querySelector(`.chart-table[data-chart="${name}"] .table-slot`);
    if (!slot) return;
    const when = SW.timeFormat(view.timezone, true);
    const clock = SW.timeFormat(view.timezone, false);
    const label = (ms) => `${when.format(new Date(ms))} ${clock.format(new Date(ms))}`;
    const table = document.createElement("table");
    table.className = "table";
    const head = table.createTHead().insertRow();
    const cols = name === "cycles" ? [`Cycles per ${chart.bucket}`] : chart.series.map((s) => `${s.label} (${chart.unit})`);
    ["Time", ...cols].forEach((text) => { const th = document.createElement("th"); th.scope = "col"; th.textContent = text; head.appendChild(th); });
    const body = table.createTBody();
    if (name === "cycles") {
      pick(chart.bars, 48).forEach(([x, y]) => { const r = body.insertRow(); r.insertCell().textContent = label(x); r.insertCell().textContent = String(y); });
    } else if (chart.series.length) {
      const byTime = new Map();
      chart.series.forEach((s, i) => s.points.forEach(([x, y]) => {
        if (!byTime.has(x)) byTime.set(x, []);
        byTime.get(x)[i] = y;
      }));
      pick(Array.from(byTime.keys()).sort((a, b) => a - b), 48).forEach((x) => {
        const r = body.insertRow();
        r.insertCell().textContent = label(x);
        chart.series.forEach((s, i) => { const v = byTime.get(x)[i]; r.insertCell().textContent = v === undefined ? "—" : String(v); });
      });
    }
    slot.replaceChildren(table);
  }

  function draw(name, chart) {
    const canvas = document.getElementById(`chart-${name}`);
    if (!canvas) return;
    if (charts[name]) charts[name].destroy();
    const bars = name === "cycles";
    const tz = view.timezone;
    const tip = SW.timeFormat(tz, false);
    const dateTip = SW.timeFormat(tz, true);
    const values = bars ? chart.bars.map(([, y]) => y)
      : [...chart.series.flatMap((s) => s.points.map(([, y]) => y)), ...(chart.marks || []).map((m) => m.value)];
    const barWidth = chart.bucket === "hour" ? HOUR : 24 * HOUR;
    charts[name] = new Chart(canvas, {
      type: bars ? "bar" : "line",
      data: bars
        // Each bar sits over its hour (or day): centred half a bucket after its start.
        ? { datasets: [{ label: `Cycles per ${chart.bucket}`, data: chart.bars.map(([x, y]) => ({ x: x + barWidth / 2, y })), backgroundColor: "#1860d6",
            barPercentage: 0.9, categoryPercentage: 1, maxBarThickness: 24 }] }
        : { datasets: lineDatasets(chart) },
      options: {
        animation: false, responsive: true, maintainAspectRatio: false, parsing: true, normalized: true,
        interaction: { mode: "nearest", intersect: false },
        scales: {
          x: { ...xAxis(tz), min: firstX(), max: view.end_ms, offset: false },
          y: yAxis(chart, values),
        },
        plugins: {
          findings: { spans: [...(view.findings || []), ...lateSpans()] },
          legend: { display: !bars, labels: { boxWidth: 12 } },
          tooltip: { callbacks: { title: (items) => items.length
            ? `${dateTip.format(new Date(items[0].parsed.x))} ${tip.format(new Date(items[0].parsed.x))}` : "" } },
        },
      },
      plugins: [shading],
    });
    canvas.setAttribute("aria-label", describe(name, chart));
    canvas.dataset.points = String(bars ? chart.bars.length
      : chart.series.reduce((n, s) => n + s.points.length, 0));
    canvas.dataset.findings = String((view.findings || []).length);
    canvas.dataset.notEvaluated = String((view.not_evaluated || []).length);
    fillTable(name, chart);
  }

  async function load(range) {
    currentRange = range;
    document.querySelectorAll(".tab").forEach((b) => {
      b.classList.toggle("active", b.dataset.range === range);
      b.setAttribute("aria-pressed", b.dataset.range === range ? "true" : "false");
    });
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
    findingsNote();
    notEvaluatedNote();
    document.body.dataset.chartsReady = range;
  }

  // New raw readings: append to the 24 h lines and slide the window.
  function addPoints(data) {
    if (currentRange !== "24h" || !view) return;
    const points = JSON.parse(data);
    const now = SW.serverNow();
    view.end_ms = now; view.start_ms = now - 24 * HOUR;
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
  const asked = new URLSearchParams(window.location.search).get("range");
  load(["24h", "7d", "season"].includes(asked) ? asked : "24h");
  SW.live(`/site/${siteId}/events`, {
    panels: (html) => SW.replacePanels(panels, html, rebind),
    points: addPoints,
  }, refreshPanels);
})();
