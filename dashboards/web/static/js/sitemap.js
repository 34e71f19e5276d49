// The console's map: a Leaflet street map with a pin per site, coloured by status and
// labelled, each pin a keyboard-reachable link; the offline schematic (Chart.js, sites
// at their coordinates) when the tile server cannot be reached.
"use strict";

window.SW = window.SW || {};

(() => {
  const COLOURS = { ok: "#1e7b34", attention: "#a84f00", problem: "#c92a2a", unknown: "#6c757d" };
  //: No tile by then (or only errors): the tile server is out of reach.
  const TILE_WAIT_MS = 6000;
  const TILE_ERRORS_BEFORE_FALLBACK = 4;

  const escapeHtml = (text) => String(text).replace(/[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
  const open = (site) => { window.location.href = `/site/${encodeURIComponent(site.id)}`; };

  function schematic(sites) {
    const box = document.getElementById("schematic");
    const canvas = document.getElementById("site-map");
    box.hidden = false;
    const meanLat = sites.reduce((s, p) => s + p.lat, 0) / Math.max(1, sites.length);
    const kx = Math.cos(meanLat * Math.PI / 180); // equirectangular: keep distances honest
    let shown = sites;
    const chart = new Chart(canvas, {
      type: "scatter",
      data: { datasets: [{ data: [], pointRadius: 8, pointHoverRadius: 10, pointBackgroundColor: [] }] },
      options: {
        animation: false, maintainAspectRatio: false,
        scales: { x: { display: false, grace: "10%" }, y: { display: false, grace: "10%" } },
        plugins: { legend: { display: false },
          tooltip: { callbacks: { label: (ctx) => `${ctx.raw.site.name}: ${ctx.raw.site.status_text}` } } },
        onClick: (_e, items) => { if (items.length) open(shown[items[0].index]); },
      },
    });
    const draw = (list) => {
      shown = list;
      const ds = chart.data.datasets[0];
      ds.data = list.map((s) => ({ x: s.lon * kx, y: s.lat, site: s }));
      ds.pointBackgroundColor = list.map((s) => COLOURS[s.status] || COLOURS.unknown);
      chart.update();
      canvas.dataset.points = String(list.length);
    };
    draw(sites);
    window.SW.map = chart;
    return draw;
  }

  function streetMap(el, config, sites, onFail) {
    const map = L.map(el, { scrollWheelZoom: false, keyboard: true });
    const tiles = L.tileLayer(config.tiles, { attribution: config.attribution, maxZoom: 19 });
    let loaded = 0, failed = 0, gaveUp = false;
    const giveUp = () => { if (!gaveUp && loaded === 0) { gaveUp = true; map.remove(); onFail(); } };
    tiles.on("tileload", () => { loaded += 1; el.dataset.tilesLoaded = String(loaded); });
    tiles.on("tileerror", () => { failed += 1; if (failed >= TILE_ERRORS_BEFORE_FALLBACK) giveUp(); });
    setTimeout(giveUp, TILE_WAIT_MS);
    // A view first: Leaflet adds neither tiles nor markers to the page before it has one.
    map.fitBounds(L.latLngBounds(sites.map((s) => [s.lat, s.lon])).pad(0.25), { maxZoom: 17 });
    tiles.addTo(map);
    const pins = sites.map((site) => {
      const icon = L.divIcon({
        className: "pin",
        iconSize: null,
        html: `<span class="pin-dot state-${escapeHtml(site.status)}"></span>`
          + `<span class="pin-label">${escapeHtml(site.name)}</span>`,
      });
      const marker = L.marker([site.lat, site.lon], { icon, keyboard: true, title: site.name });
      marker.on("click", () => open(site));
      marker.addTo(map);
      const node = marker.getElement();
      // A link opens with Enter (Leaflet's own keypress path is not reliable here).
      node.addEventListener("keydown", (e) => { if (e.key === "Enter") open(site); });
      node.setAttribute("role", "link");
      node.setAttribute("aria-label", `${site.name}: ${site.status_text}. Open the site.`);
      node.dataset.site = site.id;
      node.dataset.status = site.status;
      return { site, marker };
    });
    el.dataset.pins = String(pins.length);
    return (keep) => {
      let shown = 0;
      pins.forEach(({ site, marker }) => {
        const ok = keep(site);
        if (ok && !map.hasLayer(marker)) marker.addTo(map);
        if (!ok && map.hasLayer(marker)) marker.remove();
        if (ok) shown += 1;
      });
      el.dataset.pins = String(shown);
    };
  }

  // Returns { filter(keep) } for the console's filters, or null without a map.
  SW.siteMap = () => {
    const el = document.getElementById("street-map");
    if (!el) return null;
    const sites = JSON.parse(document.getElementById("map-data").textContent);
    const config = JSON.parse(document.getElementById("map-config").textContent);
    let keep = () => true;
    let apply = null;
    const fallback = () => {
      el.hidden = true;
      document.getElementById("map-offline").hidden = false;
      const draw = schematic(sites);
      apply = () => draw(sites.filter(keep));
      apply();
    };
    if (typeof L === "undefined") fallback();
    else {
      const filterPins = streetMap(el, config, sites, fallback);
      if (!apply) apply = () => filterPins(keep);
    }
    return { filter: (k) => { keep = k; if (apply) apply(); } };
  };
})();
