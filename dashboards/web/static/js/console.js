// Public-works console: sortable, filterable site table, site map, live updates.
"use strict";

(() => {
  const panels = document.getElementById("panels");
  const jurisdiction = panels.dataset.jurisdiction;
  let sort = { col: 1, dir: 1 }; // by status, worst first

  function applySort(table) {
    const body = table.tBodies[0];
    const rows = Array.from(body.rows);
    const kind = table.tHead.rows[0].cells[sort.col].dataset.sort;
    rows.sort((a, b) => {
      const x = a.cells[sort.col].dataset.value, y = b.cells[sort.col].dataset.value;
      const cmp = kind === "text" ? x.localeCompare(y) : Number(x) - Number(y);
      return cmp * sort.dir;
    });
    rows.forEach((r) => body.appendChild(r));
    Array.from(table.tHead.rows[0].cells).forEach((th, i) => {
      th.setAttribute("aria-sort", i === sort.col ? (sort.dir > 0 ? "ascending" : "descending") : "none");
    });
  }

  function applyFilter() {
    const table = document.getElementById("sites-table");
    if (!table) return;
    const text = document.getElementById("filter-text").value.trim().toLowerCase();
    const status = document.getElementById("filter-status").value;
    const onlyFindings = document.getElementById("filter-findings").checked;
    let shown = 0;
    Array.from(table.tBodies[0].rows).forEach((row) => {
      const ok = (!text || row.textContent.toLowerCase().includes(text) || row.dataset.site.includes(text))
        && (!status || row.dataset.status === status)
        && (!onlyFindings || Number(row.cells[2].dataset.value) > 0);
      row.hidden = !ok;
      if (ok) shown += 1;
    });
    table.dataset.shown = String(shown);
  }

  function bindTable(root) {
    const table = root.querySelector("#sites-table");
    if (!table) return;
    Array.from(table.tHead.rows[0].cells).forEach((th, i) => {
      th.tabIndex = 0;
      const go = () => { sort = { col: i, dir: sort.col === i ? -sort.dir : 1 }; applySort(table); };
      th.addEventListener("click", go);
      th.addEventListener("keydown", (e) => { if (e.key === "Enter") go(); });
    });
    applySort(table);
    applyFilter();
  }

  const after = (root) => { bindTable(root); SW.bindActions(root, refresh); };

  async function refresh() {
    const html = await fetch(window.location.pathname, { credentials: "same-origin" }).then((r) => r.text());
    const fresh = new DOMParser().parseFromString(html, "text/html").getElementById("panels");
    if (fresh) SW.replacePanels(panels, fresh.innerHTML, after);
  }

  ["filter-text", "filter-status", "filter-findings"].forEach((id) => {
    document.getElementById(id).addEventListener("input", applyFilter);
    document.getElementById(id).addEventListener("change", applyFilter);
  });
  after(panels);

  // The map: sites at their coordinates (no tile server needed), coloured by status.
  const canvas = document.getElementById("site-map");
  if (canvas) {
    const sites = JSON.parse(document.getElementById("map-data").textContent);
    const colour = { ok: "#2f9e44", attention: "#e67700", problem: "#c92a2a", unknown: "#868e96" };
    const meanLat = sites.reduce((s, p) => s + p.lat, 0) / Math.max(1, sites.length);
    const kx = Math.cos(meanLat * Math.PI / 180); // equirectangular: keep distances honest
    const chart = new Chart(canvas, {
      type: "scatter",
      data: { datasets: [{ data: sites.map((s) => ({ x: s.lon * kx, y: s.lat, site: s })),
        pointRadius: 8, pointHoverRadius: 10,
        pointBackgroundColor: sites.map((s) => colour[s.status] || "#868e96") }] },
      options: {
        animation: false, maintainAspectRatio: false,
        scales: { x: { display: false, grace: "10%" }, y: { display: false, grace: "10%" } },
        plugins: { legend: { display: false },
          tooltip: { callbacks: { label: (ctx) => `${ctx.raw.site.name}: ${ctx.raw.site.status}` } } },
        onClick: (_e, items) => {
          if (items.length) window.location.href = `/site/${sites[items[0].index].id}`;
        },
      },
    });
    canvas.dataset.points = String(sites.length);
    window.SW.map = chart;
  }

  SW.live(`/console/${jurisdiction}/events`, { panels: (html) => SW.replacePanels(panels, html, after) });
})();
