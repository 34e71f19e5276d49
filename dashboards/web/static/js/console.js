// Public-works console: sortable, filterable site table, site map, live updates.
"use strict";

(() => {
  const panels = document.getElementById("panels");
  const jurisdiction = panels.dataset.jurisdiction;
  let sort = { col: 1, dir: 1 }; // by status, worst first
  const siteMap = SW.siteMap ? SW.siteMap() : null;

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

  // One filter for the table and the map: the same sites show in both.
  function currentFilter() {
    return {
      text: document.getElementById("filter-text").value.trim().toLowerCase(),
      status: document.getElementById("filter-status").value,
      onlyFindings: document.getElementById("filter-findings").checked,
    };
  }

  function matches(f, haystack, status, findings) {
    return (!f.text || haystack.toLowerCase().includes(f.text))
      && (!f.status || status === f.status)
      && (!f.onlyFindings || findings > 0);
  }

  function applyFilter() {
    const f = currentFilter();
    const table = document.getElementById("sites-table");
    if (table) {
      let shown = 0;
      Array.from(table.tBodies[0].rows).forEach((row) => {
        const ok = matches(f, `${row.textContent} ${row.dataset.site}`, row.dataset.status,
          Number(row.cells[2].dataset.value));
        row.hidden = !ok;
        if (ok) shown += 1;
      });
      table.dataset.shown = String(shown);
    }
    if (siteMap) siteMap.filter((s) => matches(f, `${s.name} ${s.address} ${s.id}`, s.status, s.open_findings));
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

  SW.live(`/console/${jurisdiction}/events`, { panels: (html) => SW.replacePanels(panels, html, after) }, refresh);
})();
