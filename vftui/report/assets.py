"""The report's own style and script, inline (the page opens from disk and fetches nothing), and the
Content-Security-Policy that lets these two run and nothing else: a markup that escaped the escaping
would still run no script, load no image and fetch nothing."""

from __future__ import annotations

import base64
import hashlib

from vftui.report.svg import COLOURS, hue

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:1.5em auto;max-width:72em;padding:0 1em;color:#222}
h1{font-size:1.4em}h2{font-size:1.2em;border-bottom:1px solid #ddd;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:2px 6px;text-align:left}
td,th,h3{overflow-wrap:anywhere}
th{background:#f4f4f4}table.sortable th{cursor:pointer}td.n{text-align:right;font-variant-numeric:tabular-nums}
.note{background:#fff6d5;border:1px solid #e8d48a;padding:.4em .8em}
svg text{font:11px sans-serif;fill:#333}
section.item{border-top:1px solid #ddd;padding:.3em 0}
details{margin:.2em 0 .2em 1em}summary{cursor:pointer}
.msg{margin:.3em 0 .3em 1em;border-left:3px solid #ccc;padding-left:.5em}
.msg.trained{border-left-color:#2ca02c}.msg.masked{border-left-color:#bbb}
.role{font-weight:600;font-size:.9em}.mark{color:#666;font-size:.85em}
.text{white-space:pre-wrap;overflow-wrap:anywhere;font:13px/1.4 ui-monospace,monospace}
.cut{color:#a60}input{font:inherit;padding:2px 4px;margin:.3em 0}
.sources{display:grid;grid-auto-flow:column;grid-auto-columns:minmax(18em,1fr);gap:.6em;overflow-x:auto}
.source>details{margin-left:0}
body.run{display:flex;flex-direction:column}body.run>#summary{order:-1}
body.run>h1,body.run>.made,body.run>.unfinished{order:-2}body.run:has(#summary) .unfinished{display:none}
""" + "".join(  # each source's label in its charts' colour, the colours cycling (``hue``)
    f".{hue(n)}{{color:{colour}}}" for n, colour in enumerate(COLOURS)
)

SCRIPT = """
function sortKey(cell) {
  const v = cell.dataset.v;
  return v === undefined ? cell.textContent : v === "" ? NaN : Number(v);
}
function compare(x, y) {
  if (typeof x === "number" && typeof y === "number") {
    if (isNaN(x) || isNaN(y)) return isNaN(x) - isNaN(y);
    return x - y;
  }
  return String(x).localeCompare(String(y));
}
for (const table of document.querySelectorAll("table.sortable")) {
  const body = table.tBodies[0];
  table.querySelectorAll("thead th").forEach((th, column) => {
    th.addEventListener("click", () => {
      const up = th.dataset.order !== "up";
      table.querySelectorAll("thead th").forEach((other) => delete other.dataset.order);
      th.dataset.order = up ? "up" : "down";
      const rows = Array.from(body.rows);
      rows.sort((a, b) => {
        const c = compare(sortKey(a.cells[column]), sortKey(b.cells[column]));
        return up ? c : -c;
      });
      const sorted = document.createDocumentFragment();
      for (const row of rows) sorted.appendChild(row);
      body.appendChild(sorted);
    });
  });
}
function filter(input, elements, counter) {
  input.addEventListener("input", () => {
    const wanted = input.value.toLowerCase();
    let shown = 0;
    for (const element of elements) {
      element.hidden = !element.textContent.toLowerCase().includes(wanted);
      shown += !element.hidden;
    }
    counter.textContent = shown + " shown";
  });
}
filter(document.getElementById("item-filter"), document.querySelectorAll("#items tbody tr"),
       document.getElementById("item-count"));
filter(document.getElementById("rollout-search"), document.querySelectorAll("section.item"),
       document.getElementById("rollout-count"));
"""


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


POLICY = (
    f"default-src 'none'; script-src '{_sha256(SCRIPT)}'; style-src '{_sha256(STYLE)}'; "
    "img-src 'none'; form-action 'none'; base-uri 'none'"
)
