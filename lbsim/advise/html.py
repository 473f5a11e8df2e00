"""The advice as one self-contained HTML page: no network needed to open it.

Everything is inline: the CSS, the figures (SVG drawn here, with a ``<title>`` tooltip on every
mark), a few lines of JavaScript that sort a table when its header is clicked, and the report's
JSON (``<script type="application/json" id="advise-data">``), so the page carries its own data.
Nothing is fetched: no fonts, scripts, styles or images from anywhere. The page is rendered from
the same dict that is written as ``advise.json`` (:func:`render`), so the two hold the same content.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from html import escape
from typing import Any

from lbsim.plots.style import PALETTE, PHASE_COLORS

SHARE_COLORS = {"compute": PHASE_COLORS["compute"], "waiting": PHASE_COLORS["wait"],
                "communication": PHASE_COLORS["comm"], "fetching data": PHASE_COLORS["fetch"]}
DECISION_BG = "#e8f1fa"  # the decision box's background (the browser test looks for it)

_CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1b1f23;background:#fff}
main{max-width:1280px;margin:0 auto;padding:18px 28px 40px}
h1{font-size:24px;margin:8px 0 2px}h2{font-size:19px;margin:30px 0 8px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
.sub{color:#57606a;margin:0 0 14px}
#decision{background:@BG@;border-left:6px solid #0072B2;padding:14px 18px;border-radius:4px;font-size:17px}
#decision .verdict{font-weight:600;font-size:19px;margin-bottom:6px}
.chips span{display:inline-block;background:#fff;border:1px solid #c8d1dc;border-radius:12px;padding:1px 10px;margin:6px 6px 0 0;font-size:13px}
table{border-collapse:collapse;margin:8px 0;font-size:13.5px;width:100%}
th,td{border-bottom:1px solid #e1e4e8;padding:4px 6px;text-align:right;vertical-align:top}
th{background:#f6f8fa;cursor:pointer;user-select:none;max-width:120px}
th:first-child,td:first-child{text-align:left}
td.l,th.l{text-align:left}
.wide{overflow-x:auto}
tr.base td{background:#fbfbf3}tr.best td{font-weight:600}
.ci{color:#57606a;font-size:12px;white-space:nowrap}
.note{color:#57606a;font-size:13px}
ul.tight li{margin:2px 0}
svg text{font:12px system-ui,sans-serif;fill:#1b1f23}
.why p{margin:4px 0 10px}
code{background:#f6f8fa;padding:0 3px;border-radius:3px}
""".replace("@BG@", DECISION_BG)

_JS = """
(function(){
  function key(td){var v=td.getAttribute('data-v');if(v!==null&&v!==''){var x=parseFloat(v);if(!isNaN(x))return x;}
    return td.textContent.trim().toLowerCase();}
  document.querySelectorAll('table.sortable').forEach(function(t){
    t.querySelectorAll('th').forEach(function(th,i){
      th.title='click to sort';
      th.addEventListener('click',function(){
        var body=t.tBodies[0],rows=Array.prototype.slice.call(body.rows),asc=th.getAttribute('data-asc')!=='1';
        rows.sort(function(a,b){var x=key(a.cells[i]),y=key(b.cells[i]);
          if(typeof x==='number'&&typeof y==='number')return asc?x-y:y-x;
          return asc?String(x).localeCompare(String(y)):String(y).localeCompare(String(x));});
        rows.forEach(function(r){body.appendChild(r);});
        t.querySelectorAll('th').forEach(function(h){h.removeAttribute('data-asc');});
        th.setAttribute('data-asc',asc?'1':'0');
      });
    });
  });
  var data=JSON.parse(document.getElementById('advise-data').textContent);
  document.documentElement.setAttribute('data-schemes',String(data.arms.length));
})();
"""


def _fmt(x: Any, digits: int = 3) -> str:
    if x is None:
        return "—"
    if isinstance(x, float) and not math.isfinite(x):
        return "—"
    return f"{x:.{digits}g}" if isinstance(x, float) else str(x)


def _e(e: dict[str, Any], fmt: str = "{:.3g}", unit: str = "") -> str:
    """An estimate as ``value`` with its interval below (or why there is none)."""
    v = e.get("value")
    if v is None:
        return "—"
    main = fmt.format(v) + unit
    if e.get("low") is None or e.get("high") is None:
        return f'{escape(main)}<div class="ci" title="{escape(e["method"])}">no interval</div>'
    if e["low"] == e["high"]:
        return f'<span title="{escape(e["method"])}">{escape(main)}</span>'
    ci = f"[{fmt.format(e['low'])}, {fmt.format(e['high'])}]"
    return f'{escape(main)}<div class="ci" title="{escape(e["method"])}">{escape(ci)}</div>'


def _td(e: dict[str, Any], fmt: str = "{:.3g}", unit: str = "") -> str:
    v = e.get("value")
    return f'<td data-v="{"" if v is None else v}">{_e(e, fmt, unit)}</td>'


def _pct(e: dict[str, Any]) -> str:
    return _td(e, "{:.0%}")


def _speedup_figure(report: dict[str, Any]) -> str:
    """Each scheme's speedup over the baseline, per variant (dots with whiskers) and overall (diamond)."""
    arms = report["arms"]
    variants = report["variants"]
    vals = [x for a in arms for r in a["per_variant"] for x in (r["speedup"]["value"], r["speedup"]["low"], r["speedup"]["high"])
            if x is not None] + [x for a in arms for x in (a["speedup"]["low"], a["speedup"]["high"]) if x is not None] + [1.0]
    lo, hi = min(vals) * 0.9, max(vals) * 1.08
    left, right, row_h, top = 190, 30, 26 + 8 * min(len(variants), 8), 30
    width = 900
    height = top + row_h * len(arms) + 50
    plot_w = width - left - right

    def x(v: float) -> float:
        return left + (math.log(v) - math.log(lo)) / (math.log(hi) - math.log(lo)) * plot_w

    out = [f'<svg id="fig-speedup" role="img" aria-label="speedup per scheme" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">']
    for t in _ticks(lo, hi):
        out.append(f'<line x1="{x(t):.1f}" y1="{top - 6}" x2="{x(t):.1f}" y2="{height - 40}" stroke="#eaeef2"/>'
                   f'<text x="{x(t):.1f}" y="{height - 24}" text-anchor="middle">{t:g}x</text>')
    out.append(f'<line x1="{x(1.0):.1f}" y1="{top - 10}" x2="{x(1.0):.1f}" y2="{height - 40}" stroke="#57606a" '
               f'stroke-dasharray="4 3"><title>the baseline ({escape(report["baseline"]["label"])})</title></line>')
    out.append(f'<text x="{left + plot_w / 2:.0f}" y="{height - 6}" text-anchor="middle">speedup over '
               f'{escape(report["baseline"]["label"])} (log scale; dots: variants, diamond: average over variants)</text>')
    for i, a in enumerate(arms):
        y0 = top + i * row_h
        out.append(f'<text x="{left - 8}" y="{y0 + row_h / 2 + 4:.0f}" text-anchor="end">{escape(a["label"])}</text>')
        nv = len(a["per_variant"])
        for j, r in enumerate(a["per_variant"]):
            s = r["speedup"]
            if s["value"] is None:
                continue
            y = y0 + 6 + (row_h - 12) * (j + 0.5) / max(nv, 1)
            color = PALETTE[j % len(PALETTE)]
            tip = escape(f"{a['name']}, {r['label']}: {s['value']:.3g}x" +
                         (f" [{s['low']:.3g}, {s['high']:.3g}]" if s["low"] is not None and s["high"] is not None else " (no interval)"))
            if s["low"] is not None and s["high"] is not None:
                out.append(f'<line x1="{x(s["low"]):.1f}" y1="{y:.1f}" x2="{x(s["high"]):.1f}" y2="{y:.1f}" '
                           f'stroke="{color}" stroke-width="1.5"/>')
            out.append(f'<circle cx="{x(s["value"]):.1f}" cy="{y:.1f}" r="3.5" fill="{color}"><title>{tip}</title></circle>')
        s = a["speedup"]
        if s["value"] is not None:
            yc = y0 + row_h / 2
            cx = x(s["value"])
            tip = escape(f"{a['name']}, average over variants: {s['value']:.3g}x")
            out.append(f'<path d="M{cx - 6:.1f},{yc:.1f} L{cx:.1f},{yc - 6:.1f} L{cx + 6:.1f},{yc:.1f} L{cx:.1f},{yc + 6:.1f} Z" '
                       f'fill="none" stroke="#1b1f23" stroke-width="1.5"><title>{tip}</title></path>')
    out.append("</svg>")
    legend = "".join(f'<span style="border-color:{PALETTE[j % len(PALETTE)]}">&#9679; {escape(v["label"])}</span>'
                     for j, v in enumerate(variants)) if len(variants) > 1 else ""
    return "".join(out) + (f'<div class="chips">{legend}</div>' if legend else "")


def _ticks(lo: float, hi: float) -> list[float]:
    cands = [0.1, 0.2, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10, 15, 20, 30, 50, 100]
    ticks = [t for t in cands if lo <= t <= hi]
    while len(ticks) > 9:
        ticks = ticks[::2]
    return ticks


def _shares_figure(arms: Sequence[dict[str, Any]]) -> str:
    """Stacked bars: each scheme's worker time by activity."""
    left, width, bar_h, gap, top = 190, 900, 18, 8, 24
    plot_w = width - left - 30
    height = top + (bar_h + gap) * len(arms) + 20
    out = [f'<svg id="fig-why" role="img" aria-label="where the time goes" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">']
    lx = left
    for name, color in SHARE_COLORS.items():
        out.append(f'<rect x="{lx}" y="4" width="12" height="12" fill="{color}"/><text x="{lx + 16}" y="14">{escape(name)}</text>')
        lx += 30 + 8 * len(name)
    for i, a in enumerate(arms):
        y = top + i * (bar_h + gap)
        out.append(f'<text x="{left - 8}" y="{y + bar_h - 4}" text-anchor="end">{escape(a["label"])}</text>')
        x0 = float(left)
        for name, color in SHARE_COLORS.items():
            v = a["time_shares"][name]["value"] or 0.0
            w = v * plot_w
            if w <= 0:
                continue
            out.append(f'<rect x="{x0:.1f}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{color}">'
                       f'<title>{escape(a["name"])}: {escape(name)} {v:.0%} of worker time</title></rect>')
            x0 += w
    out.append("</svg>")
    return "".join(out)


def _results_table(report: dict[str, Any]) -> str:
    n = report["settings"]["samples"]
    x = report["settings"]["slowdown_pct"]
    head = ("<tr><th>scheme</th><th>speedup vs baseline</th><th>samples/s</th>"
            "<th>s per global batch</th><th>iteration P50 / P90 / P99 (s)</th>"
            f"<th>P(&gt; {x:g} % slower)</th><th>staleness (updates)</th><th>hours for {n:,} samples</th>"
            f"<th>$ for {n:,} samples</th><th>$/hour</th></tr>")
    rows = []
    choice = report["decision"]["choice"]
    for a in report["arms"]:
        cls = "base" if a["baseline"] else ("best" if a["scheme"] == choice else "")
        rows.append(
            f'<tr class="{cls}"><td>{escape(a["name"])}{" (baseline)" if a["baseline"] else ""}'
            f'<div class="ci">{escape(a["family"])}</div></td>{_td(a["speedup"], "{:.2f}", "x")}'
            f'{_td(a["throughput_samples_per_s"], "{:.0f}")}{_td(a["step_s"])}'
            f'{_iters(a["iteration_s"])}'
            f'{_pct(a["p_slowdown"])}{_td(a["staleness_mean"], "{:.2f}")}'
            f'{_td(a["cost"]["hours"], "{:.2f}")}{_td(a["cost"]["usd"], "{:,.2f}")}'
            f'<td data-v="{a["cost"]["usd_per_hour"]}">{_fmt(a["cost"]["usd_per_hour"], 4)}</td></tr>')
    return (f'<div class="wide"><table id="results" class="sortable"><thead>{head}</thead><tbody>{"".join(rows)}</tbody>'
            '</table></div>')


def _iters(it: dict[str, Any]) -> str:
    """P50 / P90 / P99 in one cell (sorted by P99), each with its interval's method as a tooltip."""
    parts = []
    for q in ("p50", "p90", "p99"):
        e = it[q]
        tip = e["method"] + (f"; {q.upper()} [{e['low']:.3g}, {e['high']:.3g}]"
                             if e["low"] is not None and e["high"] is not None and e["low"] != e["high"] else "")
        parts.append(f'<span title="{escape(tip)}">{_fmt(e["value"])}</span>')
    v = it["p99"]["value"]
    return f'<td data-v="{"" if v is None else v}">{" / ".join(parts)}</td>'


def _variants_table(report: dict[str, Any]) -> str:
    arms = report["arms"]
    best = report["decision"]["best_per_variant"]
    head = "<tr><th>variant</th>" + "".join(f"<th>{escape(a['name'])}</th>" for a in arms) + "<th class='l'>best</th></tr>"
    rows = []
    for j, v in enumerate(report["variants"]):
        cells = []
        for a in arms:
            r = a["per_variant"][j]
            cls = ' style="font-weight:600;background:#eaf5ea"' if best[str(v["index"])] == a["scheme"] else ""
            cells.append(f'<td data-v="{r["speedup"]["value"]}"{cls}>{_e(r["speedup"], "{:.2f}", "x")}</td>')
        name = next(a["name"] for a in arms if a["scheme"] == best[str(v["index"])])
        rows.append(f'<tr><td>{escape(v["label"])}<div class="ci">{v["seeds"]} seeds</div></td>{"".join(cells)}'
                    f'<td class="l">{escape(name)}</td></tr>')
    return (f'<div class="wide"><table id="variants" class="sortable"><thead>{head}</thead><tbody>{"".join(rows)}'
            '</tbody></table></div>')


def _cost_section(report: dict[str, Any]) -> str:
    s = report["settings"]
    seen: dict[str, dict[str, Any]] = {}
    for a in report["arms"]:
        for line in a["cost"]["lines"]:
            seen.setdefault(line["what"], line)
    rows = "".join(f'<tr><td>{escape(w)}</td><td>{_fmt(line["usd_per_hour"], 4)}</td><td class="l">{escape(line["source"])}</td></tr>'
                   for w, line in seen.items())
    target = ""
    if any("to_target_usd" in a["cost"] for a in report["arms"]):
        trs = "".join(f'<tr><td>{escape(a["name"])}</td>{_td(a["cost"]["to_target_s"], "{:.0f}", " s")}'
                      f'{_td(a["cost"]["to_target_usd"], "{:,.2f}")}</tr>' for a in report["arms"])
        target = ("<h3>To the target accuracy</h3><table class='sortable'><thead><tr><th>scheme</th><th>time</th>"
                  f"<th>$</th></tr></thead><tbody>{trs}</tbody></table>")
    return (f"<p>Time and money to process {s['samples']:,} samples ({escape(s['samples_source'])}) are in the table "
            "above: hours = samples / throughput, $ = hours x the cluster's price per hour (the parameter-server "
            "schemes also pay for their server).</p>"
            f"<table id='prices'><thead><tr><th>what</th><th>$/hour</th><th class='l'>source</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>{target}")


def render(report: dict[str, Any]) -> str:
    """The whole page for ``report`` (the dict written as advise.json)."""
    d = report["decision"]
    names = {a["scheme"]: a["name"] for a in report["arms"]}
    chips = [f"recommended: {names[d['choice']]}", f"best on average: {names[d['best_expected']]}",
             f"best worst case: {names[d['best_worst_case']]}"]
    if d["depends_on"]:
        chips.append("depends on: " + ", ".join(d["depends_on"]))
    if report["deterministic"]:
        chips.append("deterministic: seeds changed nothing, so no intervals")
    q = report["question"]
    mapping = "".join(f"<li><code>{escape(m)}</code></li>" for m in q.get("mapping", []))
    unknowns = "".join(f"<li><code>{escape(u['key'])}</code> ({escape(u['source'])}): {escape(', '.join(u['values']))}</li>"
                       for u in report["unknowns"]) or "<li>none: the scenario as given</li>"
    assumptions = "".join(f"<li>{escape(a)}</li>" for a in report["assumptions"])
    method = "".join(f"<li>{escape(m)}</li>" for m in report["method"])
    skipped = "".join(f"<li><b>{escape(k)}</b>: {escape(v)}</li>" for k, v in report["skipped"].items())
    why = "".join(f"<p>{escape(a['why'])}</p>" for a in report["arms"])
    data = json.dumps(report, sort_keys=True).replace("</", "<\\/")
    title = f"lbsim advise: {q['title']}"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(title)}</title><style>{_CSS}</style></head>
<body><main>
<h1>{escape(title)}</h1>
<p class="sub">{escape(q['description'])} &middot; {report['workers']} workers &middot; every scheme against
{escape(report['baseline']['label'])} &middot; {len(report['variants'])} variant(s) x {escape(report['seeds_text'])}</p>
<section id="decision"><div class="verdict">{escape(d['text'])}</div>
<div class="chips">{''.join(f'<span>{escape(c)}</span>' for c in chips)}</div></section>
<h2>Every scheme against one baseline</h2>
<p class="note">Speedup: samples/s over the baseline's on the same variant and seed (with intervals: 95 %; hover
an interval for its method). Click a column header to sort.</p>
{_results_table(report)}
<h2>How the answer depends on the unknowns</h2>
<ul class="tight">{unknowns}</ul>
{_speedup_figure(report)}
{_variants_table(report)}
<h2>Why: where the time goes</h2>
{_shares_figure(report['arms'])}
<div class="why">{why}</div>
<h2>Cost</h2>
{_cost_section(report)}
<h2>Assumptions</h2>
<p class="note">The cluster as lbsim modelled it:</p><ul class="tight">{mapping}</ul>
<ul class="tight">{assumptions}</ul>
{f'<h2>Not applicable</h2><ul class="tight">{skipped}</ul>' if skipped else ''}
<h2>Method</h2><ul class="tight">{method}</ul>
<p class="note">lbsim {escape(report['lbsim_version'])} &middot; <code>{escape(report['command'])}</code></p>
</main>
<script type="application/json" id="advise-data">{data}</script>
<script>{_JS}</script>
</body></html>
"""
