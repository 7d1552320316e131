"""The live status page: one self-contained HTML document (inline CSS/JS, ``<canvas>`` plots; no
CDN, so it works offline) polling ``/status?history=1`` every second: the whole history once, then
only the samples after the last one it has (``&since=<t>``), which it appends to its own copy.

Each plot writes how many data points it drew into ``<span id="points-...">`` and its y-axis ticks
into a hidden ``<span id="ticks-...">``, so a headless browser test can check from the DOM that
the plots had data and round ticks. Ticks are 1, 2 or 5 x 10^n apart; the lag plot and its legend
follow the assignment (partitions given away in a rebalance are dropped).
"""

from __future__ import annotations

import html
import json

__all__ = ["render_status_page"]

_PAGE = r"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>agentstream · __APP__ · __ADDRESS__</title>
<style>
  :root { --bg:#f6f7f9; --card:#fff; --ink:#1d2330; --muted:#6b7385; --line:#e3e6ec; }
  * { box-sizing: border-box; }
  body { margin:0; font:14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; background:var(--bg); color:var(--ink); }
  header { display:flex; align-items:baseline; gap:16px; padding:14px 20px; background:#1d2330; color:#fff; }
  header h1 { font-size:18px; margin:0; }
  header .sub { color:#aab2c5; }
  #conn { margin-left:auto; font-size:12px; padding:2px 8px; border-radius:10px; background:#2f8f5b; }
  #conn.down { background:#b83b3b; }
  main { padding:16px 20px; }
  .facts { display:grid; grid-template-columns:repeat(6, 1fr); gap:10px; margin-bottom:14px; }
  .fact { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:8px 12px; }
  .fact b { display:block; font-size:18px; }
  .fact span { color:var(--muted); font-size:12px; }
  .grid { display:grid; grid-template-columns:1fr 1fr; gap:14px; }
  .card { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:10px 12px; }
  .card h2 { font-size:14px; margin:0 0 6px; display:flex; gap:8px; align-items:baseline; }
  .card h2 small { color:var(--muted); font-weight:normal; }
  canvas { width:100%; height:220px; display:block; }
  .legend { display:flex; flex-wrap:wrap; gap:4px 12px; font-size:12px; color:var(--muted); min-height:18px; }
  .legend i { display:inline-block; width:10px; height:10px; border-radius:2px; margin-right:4px; vertical-align:-1px; }
  .points { font-size:11px; color:var(--muted); margin-left:auto; }
  .ticks { display:none; }
</style>
</head>
<body>
<header><h1>agentstream · __APP__</h1><span class="sub">worker __ADDRESS__</span><span id="conn">connecting…</span></header>
<main>
  <div class="facts">
    <div class="fact"><b id="f-generation">–</b><span>rebalances</span></div>
    <div class="fact"><b id="f-active">–</b><span>active partitions</span></div>
    <div class="fact"><b id="f-processed">–</b><span>records handled</span></div>
    <div class="fact"><b id="f-lag">–</b><span>total lag</span></div>
    <div class="fact"><b id="f-commits">–</b><span>commits</span></div>
    <div class="fact"><b id="f-errors">–</b><span>decode / agent errors</span></div>
  </div>
  <div class="grid">
    <div class="card"><h2>Records/s per agent <span class="points">points: <span id="points-records">0</span><span class="ticks" id="ticks-records"></span></span></h2>
      <canvas id="c-records"></canvas><div class="legend" id="l-records"></div></div>
    <div class="card"><h2>Consumer lag per partition <span class="points">points: <span id="points-lag">0</span><span class="ticks" id="ticks-lag"></span></span></h2>
      <canvas id="c-lag"></canvas><div class="legend" id="l-lag"></div></div>
    <div class="card"><h2>Restore progress <small id="restore-note"></small><span class="points">points: <span id="points-restore">0</span><span class="ticks" id="ticks-restore"></span></span></h2>
      <canvas id="c-restore"></canvas><div class="legend" id="l-restore"></div></div>
    <div class="card"><h2>Table keys (local) <span class="points">points: <span id="points-tables">0</span><span class="ticks" id="ticks-tables"></span></span></h2>
      <canvas id="c-tables"></canvas><div class="legend" id="l-tables"></div></div>
  </div>
</main>
<script>
"use strict";
const COLORS = ["#3b6fd8", "#e07b39", "#2f9e6a", "#c64b8c", "#8a63d2", "#c9a227", "#3aa5b8", "#d14b4b",
                "#6d8a2f", "#7c7c7c"];
const $ = (id) => document.getElementById(id);
const fmt = (v) => v == null ? "–" : (Math.abs(v) >= 1e6 ? (v / 1e6).toFixed(1) + "M" :
                                      Math.abs(v) >= 1e4 ? (v / 1e3).toFixed(1) + "k" :
                                      Number.isInteger(v) ? String(v) : v.toFixed(1));

// Axis ticks at round values: a step of 1, 2 or 5 x 10^n, the top a multiple of it.
function niceStep(raw) {
  if (!(raw > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 5]) if (m * p >= raw * (1 - 1e-9)) return m * p;
  return 10 * p;
}
function niceAxis(maxv, intervals) {
  const step = niceStep(maxv / intervals);
  const top = Math.max(step, Math.ceil(maxv / step - 1e-9) * step);
  const ticks = [];
  for (let i = 0; i * step <= top * (1 + 1e-9); i++) ticks.push(Number((i * step).toPrecision(12)));
  return {top: top, step: step, ticks: ticks};
}
const tickFmt = (v) => Math.abs(v) >= 1e6 ? Number((v / 1e6).toPrecision(6)) + "M" :
                       Math.abs(v) >= 1e4 ? Number((v / 1e3).toPrecision(6)) + "k" : String(Number(v.toPrecision(6)));

// The history the page keeps: the first poll brings it whole, later ones only the samples after
// its last time (?since=), appended here (a sample the page already has is skipped), the oldest
// dropped beyond the server's history size. Columns are {name: [value per sample]}.
// BEGIN mergeHistory
function mergeHistory(kept, add) {
  if (!kept || !kept.t) return add;
  const last = kept.t.length ? kept.t[kept.t.length - 1] : -Infinity;
  let from = 0;
  while (from < add.t.length && add.t[from] <= last) from++;
  const n0 = kept.t.length, k = add.t.length - from;
  const pad = (m) => new Array(m).fill(null);
  const out = {t: kept.t.concat(add.t.slice(from)), size: add.size || kept.size || 300};
  for (const f of ["records_per_s", "lag", "restore", "table_keys"]) {
    const a = kept[f] || {}, b = add[f] || {}, cols = {};
    for (const name of new Set(Object.keys(a).concat(Object.keys(b)))) {
      const mine = a[name] || pad(n0), theirs = b[name] ? b[name].slice(from) : pad(k);
      cols[name] = mine.concat(theirs.length === k ? theirs : pad(k));
    }
    out[f] = cols;
  }
  const drop = Math.max(0, out.t.length - out.size);
  if (drop) {
    out.t = out.t.slice(drop);
    for (const f of ["records_per_s", "lag", "restore", "table_keys"]) {
      for (const name of Object.keys(out[f])) {
        const col = out[f][name].slice(drop);
        if (f !== "restore" && col.every((v) => v == null)) delete out[f][name];
        else out[f][name] = col;
      }
    }
  }
  return out;
}
// END mergeHistory

// Series of partitions the worker no longer has (given away in a rebalance) leave plot and legend.
function following(series, current) {
  const out = {};
  for (const n of Object.keys(series)) if (current.has(n)) out[n] = series[n];
  return out;
}

function draw(name, t, series, opts) {
  const canvas = $("c-" + name), legend = $("l-" + name);
  const dpr = window.devicePixelRatio || 1;
  const w = canvas.clientWidth || 500, h = canvas.clientHeight || 220;
  canvas.width = w * dpr; canvas.height = h * dpr;
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, w, h);
  const pad = {l: 46, r: 10, t: 8, b: 20};
  const names = Object.keys(series);
  let top = opts.ymax || 0, points = 0;
  for (const n of names) for (const v of series[n]) if (v != null) { points++; if (!opts.ymax && v > top) top = v; }
  const axis = niceAxis(top, 5);
  const ymax = axis.top;
  const t0 = t.length ? t[0] : 0, t1 = t.length ? t[t.length - 1] : 1, span = Math.max(t1 - t0, 1);
  const X = (x) => pad.l + (w - pad.l - pad.r) * (t.length > 1 ? (x - t0) / span : 1);
  const Y = (y) => pad.t + (h - pad.t - pad.b) * (1 - y / ymax);
  ctx.strokeStyle = "#e3e6ec"; ctx.fillStyle = "#6b7385"; ctx.font = "11px system-ui, sans-serif"; ctx.lineWidth = 1;
  for (const y of axis.ticks) {
    const py = Y(y);
    ctx.beginPath(); ctx.moveTo(pad.l, py); ctx.lineTo(w - pad.r, py); ctx.stroke();
    ctx.textAlign = "right"; ctx.fillText(tickFmt(y), pad.l - 6, py + 4);
  }
  $("ticks-" + name).textContent = axis.ticks.join(",");
  ctx.textAlign = "left"; ctx.fillText(t.length ? "-" + Math.round(span) + "s" : "no samples yet", pad.l, h - 5);
  ctx.textAlign = "right"; ctx.fillText("now", w - pad.r, h - 5);
  legend.innerHTML = "";
  names.forEach((n, i) => {
    const color = COLORS[i % COLORS.length], vals = series[n];
    ctx.strokeStyle = color; ctx.fillStyle = color; ctx.lineWidth = 2; ctx.beginPath();
    let pen = false, last = null;
    vals.forEach((v, j) => {
      if (v == null) { pen = false; return; }
      last = v;
      const px = X(t[j]), py = Y(v);
      if (pen) ctx.lineTo(px, py); else ctx.moveTo(px, py);
      pen = true;
    });
    ctx.stroke();
    if (vals.length === 1 && vals[0] != null) { ctx.beginPath(); ctx.arc(X(t[0]), Y(vals[0]), 3, 0, 7); ctx.fill(); }
    const item = document.createElement("span");
    item.innerHTML = '<i style="background:' + color + '"></i>';
    item.appendChild(document.createTextNode(n + " " + fmt(last) + (opts.unit || "")));
    legend.appendChild(item);
  });
  $("points-" + name).textContent = String(points);
  return points;
}

function render(s) {
  const h = s.history;
  $("f-generation").textContent = s.assignment.generation;
  $("f-active").textContent = s.assignment.active.length ? s.assignment.active.join(", ") : "none";
  $("f-processed").textContent = fmt(Object.values(s.agents).reduce((a, x) => a + x.processed, 0));
  $("f-lag").textContent = fmt(Object.values(s.lag).reduce((a, x) => a + (x.lag || 0), 0));
  $("f-commits").textContent = fmt(s.worker.commits);
  $("f-errors").textContent = s.errors.decode + " / " + s.errors.agent;
  draw("records", h.t, h.records_per_s, {unit: "/s"});
  draw("lag", h.t, following(h.lag, new Set(Object.keys(s.lag))), {});
  draw("restore", h.t, {"partitions ready %": h.restore.ready_pct}, {ymax: 100, unit: "%"});
  $("restore-note").textContent = fmt(s.restore.restored_records) + " changelog records restored" +
    (s.restore.restoring ? " · restoring " + s.restore.not_ready.join(", ") : "");
  draw("tables", h.t, h.table_keys, {});
}

let history = null;

async function tick() {
  try {
    const have = history && history.t.length ? "&since=" + history.t[history.t.length - 1] : "";
    const r = await fetch("/status?history=1" + have, {headers: {Accept: "application/json"}, cache: "no-store"});
    if (!r.ok) throw new Error("HTTP " + r.status);
    const s = await r.json();
    history = mergeHistory(history, s.history);
    s.history = history;
    render(s);
    $("conn").textContent = "live"; $("conn").className = "";
  } catch (e) {
    $("conn").textContent = "disconnected: " + e.message; $("conn").className = "down";
  } finally {
    setTimeout(tick, 1000);
  }
}
tick();
</script>
</body>
</html>
"""


def render_status_page(app_id: str, address: str, status_path: str = "/status") -> str:
    """The page; ``status_path``: where it polls the JSON status (``/agentstream/status`` when an
    app page takes ``/status``)."""
    page = _PAGE.replace("__APP__", html.escape(app_id)).replace("__ADDRESS__", html.escape(address))
    return page.replace('fetch("/status?history=1"', f"fetch({json.dumps(status_path + '?history=1')}")
