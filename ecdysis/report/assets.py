"""The report's inline stylesheet and script (plain CSS, small vanilla JS: the file must open offline)."""

from __future__ import annotations

CSS = """
:root { --fg: #1d2330; --muted: #5f6b7a; --line: #d9dee5; --bg: #f6f8fa; --ok: #2e7d32; --bad: #c62828;
        --warn: #a15c00; --accent: #1f5fae; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); margin: 0;
       background: #fff; }
header.top { background: #14213d; color: #fff; padding: 14px 28px; }
header.top h1 { margin: 0; font-size: 20px; }
header.top .sub { color: #c9d3e3; font-size: 13px; }
nav.toc { padding: 8px 28px; border-bottom: 1px solid var(--line); background: var(--bg); }
nav.toc a { margin-right: 18px; color: var(--accent); text-decoration: none; }
main { padding: 10px 28px 40px; max-width: 1500px; }
section { margin: 24px 0 34px; }
h2 { border-bottom: 2px solid var(--line); padding-bottom: 4px; }
h3 { margin: 22px 0 8px; }
h4 { margin: 14px 0 6px; }
table.data { border-collapse: collapse; margin: 8px 0 14px; font-size: 13px; }
table.data th, table.data td { border: 1px solid var(--line); padding: 4px 8px; vertical-align: top; text-align: left; }
table.data th { background: var(--bg); }
table.data td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.muted { color: var(--muted); }
.note { color: var(--muted); font-style: italic; }
.badge { display: inline-block; padding: 0 7px; border-radius: 9px; font-size: 12px; font-weight: 600;
         background: #e8ecf1; color: var(--fg); }
.badge.ok, .badge.success, .badge.accepted { background: #e3f2e4; color: var(--ok); }
.badge.bad, .badge.failure, .badge.rejected, .badge.blocked { background: #fbe4e4; color: var(--bad); }
.badge.user-action { background: #e0f2f1; color: #00695c; }
.badge.excluded, .badge.warn { background: #fdf0dc; color: var(--warn); }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12.5px; }
pre { background: var(--bg); border: 1px solid var(--line); padding: 8px 10px; overflow-x: auto;
      white-space: pre-wrap; word-break: break-word; margin: 4px 0; }
pre.diff { white-space: pre; padding: 0; }
pre.diff span { display: block; padding: 0 10px; }
pre.diff .d-add { background: #e6ffec; color: #116329; }
pre.diff .d-del { background: #ffebe9; color: #82071e; }
pre.diff .d-hunk { background: #ddf4ff; color: #0550ae; }
pre.diff .d-meta { color: var(--muted); font-weight: 600; }
.round-card { border: 1px solid var(--line); border-radius: 6px; padding: 4px 16px 12px; margin: 14px 0; }
.round-card > h4 { margin-top: 10px; }
.chart { border: 1px solid var(--line); border-radius: 6px; margin: 10px 0; }
.filters { display: flex; flex-wrap: wrap; gap: 10px 16px; align-items: end; padding: 10px 12px;
           background: var(--bg); border: 1px solid var(--line); border-radius: 6px; position: sticky; top: 0;
           z-index: 5; }
.filters label { display: flex; flex-direction: column; font-size: 12px; color: var(--muted); }
.filters select { min-width: 120px; max-width: 260px; font-size: 13px; }
#traj-count { font-weight: 600; margin-left: auto; }
details.traj { border: 1px solid var(--line); border-radius: 6px; margin: 6px 0; }
details.traj > summary { cursor: pointer; padding: 6px 10px; background: var(--bg); }
details.traj[open] > summary { border-bottom: 1px solid var(--line); }
details.traj .body { padding: 6px 14px 12px; }
.msg { border-left: 4px solid var(--line); padding: 2px 10px; margin: 6px 0; }
.msg .who { font-size: 12px; font-weight: 700; text-transform: uppercase; color: var(--muted); }
.msg.assistant { border-color: #1f5fae; }
.msg.user { border-color: #7b1fa2; }
.msg.tool { border-color: #8d6e00; }
.msg.system { border-color: #555; }
.msg.user-action, .msg.user-result { border-color: #00897b; border-style: dashed; }
tr.blocked td { background: #fff4f4; }
details.raw > summary { cursor: pointer; color: var(--accent); }
"""

JS = """
(function () {
  "use strict";
  var FIELDS = ["run", "phase", "task", "model", "round", "outcome"];
  function control(name) { return document.getElementById("f-" + name); }
  function apply() {
    var want = {};
    FIELDS.forEach(function (f) { var el = control(f); want[f] = el ? el.value : ""; });
    var items = document.querySelectorAll("details.traj");
    var shown = 0;
    items.forEach(function (item) {
      var keep = FIELDS.every(function (f) { return !want[f] || item.getAttribute("data-" + f) === want[f]; });
      item.hidden = !keep;
      if (keep) { shown += 1; }
    });
    var count = document.getElementById("traj-count");
    if (count) { count.textContent = shown + " of " + items.length + " trajectories shown"; }
  }
  function fromHash() {
    var params = new URLSearchParams(window.location.hash.slice(1));
    FIELDS.forEach(function (f) {
      var el = control(f);
      if (el && params.has(f)) { el.value = params.get(f); }
    });
  }
  function init() {
    fromHash();
    FIELDS.forEach(function (f) { var el = control(f); if (el) { el.addEventListener("change", apply); } });
    var reset = document.getElementById("f-reset");
    if (reset) {
      reset.addEventListener("click", function () {
        FIELDS.forEach(function (f) { var el = control(f); if (el) { el.value = ""; } });
        apply();
      });
    }
    function setOpen(open) {
      document.querySelectorAll("details.traj").forEach(function (item) { item.open = open && !item.hidden; });
    }
    var expand = document.getElementById("f-expand");
    if (expand) { expand.addEventListener("click", function () { setOpen(true); }); }
    var collapse = document.getElementById("f-collapse");
    if (collapse) { collapse.addEventListener("click", function () { setOpen(false); }); }
    apply();
    document.body.setAttribute("data-ready", "1");
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", init); } else { init(); }
})();
"""
