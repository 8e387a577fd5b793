"""The matrix written down: `reports/matrix/matrix.json` (every cell and miss, what the nightly job compares)
and `matrix.html` (a self-contained page with the corpus report's look: a summary per engine on top, then a
row per template, filterable by name, family and parser, each cell opening on the outputs its engine misses
with the engine's answer and ours), and the summary as a Markdown table (the command's output, the README's).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from autoparser.corpus.report import TABLE_JS, html_text, page_head
from autoparser.matrix.engines import AutoparserEngine
from autoparser.matrix.run import AUTOPARSER_WRONG, ENGINE_WRONG, POLICIES, Cell, Column, Matrix, Miss, Row

__all__ = ["matrix_changes", "matrix_from_json", "matrix_to_json", "render_html", "summary_markdown", "write_matrix"]

# Misses listed per cell on the page (every one is in matrix.json).
_SHOWN = 5
# Characters of an output shown per miss on the page.
_OUTPUT_CHARS = 500


# --- JSON ----------------------------------------------------------------------------------------------------------

def matrix_to_json(matrix: Matrix) -> dict[str, Any]:
    """The matrix as JSON. A missed case's output and autoparser's reading of it are written once per template
    (`outputs`, `ours`), not once per engine that misses it."""
    def row(r: Row) -> dict[str, Any]:
        misses = [m for c in r.cells.values() for m in c.misses]
        return {
            "template": r.template, "family": r.family, "calls": r.calls, "error": r.error,
            "outputs": {m.case: m.output for m in misses}, "ours": {m.case: m.ours for m in misses},
            "cells": {engine: {"choice": c.choice, "rendered": list(c.rendered), "variants": list(c.variants),
                               "misses": [{"case": m.case, "kind": m.kind, "verdict": m.verdict,
                                           "differences": list(m.differences), "got": m.got, "reason": m.reason}
                                          for m in c.misses]}
                      for engine, c in r.cells.items()}}

    return {
        "made_from": matrix.made_from,
        "columns": [{"engine": c.engine, "missing": c.missing} for c in matrix.columns],
        "summary": matrix.summary(),
        "summary_with_variants": matrix.summary(variants=True),
        "choices": matrix.choices(),
        "templates": [row(r) for r in matrix.rows],
    }


def matrix_from_json(data: Mapping[str, Any]) -> Matrix:
    """A matrix as `matrix_to_json` wrote it (the nightly job reads the previous night's)."""
    def cell(c: Mapping[str, Any], t: Mapping[str, Any]) -> Cell:
        misses = tuple(Miss(m["case"], m["kind"], m["verdict"], tuple(m["differences"]), t["outputs"][m["case"]],
                            m["got"], t["ours"][m["case"]], m.get("reason")) for m in c["misses"])
        return Cell(c["choice"], (c["rendered"][0], c["rendered"][1]), (c["variants"][0], c["variants"][1]), misses)

    rows = tuple(Row(t["template"], t["family"], {e: cell(c, t) for e, c in t["cells"].items()}, t["calls"],
                     t["error"]) for t in data["templates"])
    return Matrix(tuple(Column(c["engine"], c["missing"]) for c in data["columns"]), rows, data.get("made_from", ""))


# --- Markdown ------------------------------------------------------------------------------------------------------

def _pct(right: int, n: int) -> str:
    return f"{100 * right / n:.1f}%" if n else "–"


def summary_markdown(matrix: Matrix) -> str:
    """Per engine: templates whose rendered outputs it reads fully right / partly / not at all, and the share of
    outputs (rendered; with their realistic variants) read as meant."""
    plain, wide = matrix.summary(), matrix.summary(variants=True)
    lines = ["| engine | templates fully right | partly | not at all | rendered outputs read as meant "
             "| with realistic variants |", "|---|---:|---:|---:|---:|---:|"]
    for col in matrix.columns:
        if col.missing is not None:
            lines.append(f"| {col.engine} | not run: {col.missing.replace('|', '/')} | | | | |")
            continue
        s, w = plain[col.engine], wide[col.engine]
        templates = s["full"] + s["partly"] + s["none"]
        lines.append(f"| {col.engine} | {s['full']} of {templates} ({_pct(s['full'], templates)}) | {s['partly']} "
                     f"| {s['none']} | {s['right']} of {s['cases']} ({_pct(s['right'], s['cases'])}) "
                     f"| {w['right']} of {w['cases']} ({_pct(w['right'], w['cases'])}) |")
    return "\n".join(lines) + "\n"


# --- HTML ----------------------------------------------------------------------------------------------------------

def _record(record: Mapping[str, Any] | None) -> str:
    return "error" if record is None else json.dumps(record, ensure_ascii=False, indent=1)


def _miss_html(m: Miss, ours: bool) -> str:
    output = m.output if len(m.output) <= _OUTPUT_CHARS else m.output[:_OUTPUT_CHARS] + " …"
    reason = ""
    if ours and m.verdict == AUTOPARSER_WRONG:
        reason = f"<br><i>ratchet: {html_text(m.reason)}</i>" if m.reason else "<br><b>new: not in the ratchet</b>"
    return (f'<li data-verdict="{html_text(m.verdict)}"><code>{html_text(m.case)}</code>'
            f" <b>{html_text(m.verdict)}</b>{reason}"
            f"<br>{html_text('; '.join(m.differences))}<pre class=\"output\">{html_text(output)}</pre>"
            f"<table><tr><th>engine</th><th>autoparser</th></tr><tr><td><pre>{html_text(_record(m.got))}</pre></td>"
            f"<td><pre>{html_text(_record(m.ours))}</pre></td></tr></table></li>")


def _cell_html(engine: str, cell: Cell | None) -> str:
    if cell is None:
        return '<td data-v="-1" class="none">not run</td>'
    right, n = cell.rendered
    vright, vn = cell.variants
    share = right / n if n else 1.0
    cls = "pass" if right == n and vright == vn else "fail" if right < n else "partial"
    choice = f'<small class="choice">{html_text(cell.choice or "no parser picked")}</small>'
    counts = f"{right}/{n}" + (f" <small>+{vright}/{vn} var.</small>" if vn else "")
    if not cell.misses:
        return f'<td data-v="{share:.4f}" class="num {cls}" data-engine="{html_text(engine)}">{counts}{choice}</td>'
    items = "".join(_miss_html(m, engine == AutoparserEngine.name) for m in cell.misses[:_SHOWN])
    more = f"<li>… {len(cell.misses) - _SHOWN} more in matrix.json</li>" if len(cell.misses) > _SHOWN else ""
    return (f'<td data-v="{share:.4f}" class="num {cls}" data-engine="{html_text(engine)}"><details class="cell">'
            f"<summary>{counts}</summary>{choice}<ol class=\"misses\">{items}{more}</ol></details></td>")


def _row_html(row: Row, engines: list[str]) -> str:
    failing = any(c.misses for c in row.cells.values())
    choices = " ".join(f"{e}:{(c.choice or 'none')}" for e, c in row.cells.items())
    search = f"{row.template} {row.family} {choices}".lower()
    name = html_text(row.template) + (f"<br><small>{html_text(row.error)}</small>" if row.error else "")
    cells = "".join(_cell_html(e, row.cells.get(e)) for e in engines)
    return (f'<tr id="t-{html_text(row.template)}" data-search="{html_text(search)}" data-failing="{int(failing)}"'
            f' data-family="{html_text(row.family)}">'
            f'<td data-v="{html_text(row.template)}">{name}</td>'
            f'<td data-v="{html_text(row.family)}">{html_text(row.family)}</td>'
            f"{cells}</tr>")


def _summary_html(matrix: Matrix) -> str:
    plain, wide = matrix.summary(), matrix.summary(variants=True)
    rows = []
    for col in matrix.columns:
        if col.missing is not None:
            rows.append(f'<tr data-engine="{html_text(col.engine)}"><td>{html_text(col.engine)}</td>'
                        f'<td colspan="5" class="none">not run: {html_text(col.missing)}</td></tr>')
            continue
        s, w = plain[col.engine], wide[col.engine]
        templates = s["full"] + s["partly"] + s["none"]
        rows.append(f'<tr data-engine="{html_text(col.engine)}" data-full="{s["full"]}" data-templates="{templates}">'
                    f"<td>{html_text(col.engine)}</td><td class=\"num\">{s['full']} ({_pct(s['full'], templates)})</td>"
                    f"<td class=\"num\">{s['partly']}</td><td class=\"num\">{s['none']}</td>"
                    f"<td class=\"num\">{s['right']}/{s['cases']} ({_pct(s['right'], s['cases'])})</td>"
                    f"<td class=\"num\">{w['right']}/{w['cases']} ({_pct(w['right'], w['cases'])})</td></tr>")
    return ("<table id=\"engine-summary\"><thead><tr><th>Engine</th><th>Templates fully right</th><th>Partly</th>"
            "<th>Not at all</th><th>Rendered outputs read as meant</th><th>With realistic variants</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>")


def _choices_html(matrix: Matrix) -> str:
    rows = "".join(
        f'<tr data-engine="{html_text(e)}"><td>{html_text(e)}</td><td class="num">{c["templates"]}</td>'
        f'<td class="num">{c["right"]}</td><td class="num">{c["wrong"]}</td><td class="num">{c["none"]}</td></tr>'
        for e, c in matrix.choices().items())
    return ("<table id=\"parser-choice\"><thead><tr><th>Parser choice</th><th>Templates that render calls</th>"
            "<th>Its parser reads every rendered output</th><th>Misreads some</th><th>Picks none (configure by hand: "
            "filter <code>ENGINE:none</code>)</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>")


def _verdicts(matrix: Matrix) -> str:
    counts: dict[str, dict[str, int]] = {c.engine: {} for c in matrix.columns if c.missing is None}
    for row in matrix.rows:
        for engine, cell in row.cells.items():
            for m in cell.misses:
                counts[engine][m.verdict] = counts[engine].get(m.verdict, 0) + 1
    names = [AUTOPARSER_WRONG, ENGINE_WRONG, *POLICIES]
    body = "".join(f"<tr><td>{html_text(e)}</td>" + "".join(f'<td class="num">{c.get(v, 0)}</td>' for v in names)
                   + "</tr>" for e, c in counts.items())
    return (f"<table id=\"verdicts\"><thead><tr><th>Misses of</th>{''.join(f'<th>{html_text(v)}</th>' for v in names)}"
            f"</tr></thead><tbody>{body}</tbody></table>")


def render_html(matrix: Matrix, *, title: str = "autoparser cross-engine matrix") -> str:
    engines = [c.engine for c in matrix.columns]
    head = ('<th data-key="name" title="Template">Template</th><th data-key="family" title="Family">Family</th>'
            + "".join(f'<th data-key="{html_text(e)}" data-type="num" title="{html_text(e)}">{html_text(e)}</th>'
                      for e in engines))
    body = "\n".join(_row_html(r, engines) for r in matrix.rows)
    policies = "".join(f"<li><b>{html_text(k)}</b>: {html_text(v)}</li>" for k, v in POLICIES.items())
    css = (".partial{background:#fdf3c8}small.choice{display:block;color:#555}"
           "ol.misses{max-width:48em;text-align:left;padding-left:1.2em}pre.output{background:#f6f6f6}")
    return f"""{page_head(title, css)}
<body>
<h1>{html_text(title)}</h1>
<p id="made-from"><small>{html_text(matrix.made_from)}</small></p>
{_summary_html(matrix)}
<p><small>Each cell: the template's own rendered outputs (its round-trip scenarios) the engine reads as meant,
then (var.) the realistic variants of them (what models write around the template's markup), and the parser the
engine picks for the template. Texts are compared without surrounding whitespace, arguments as JSON, ids
ignored. Click a cell for the outputs it misses, with the engine's answer and autoparser's. A miss is
<b>{AUTOPARSER_WRONG}</b> (fixed or in the ratchet with its reason), <b>{ENGINE_WRONG}</b> (it loses or misreads what
the template renders, where autoparser reads it), or a policy:</small></p><ul><small>{policies}</small></ul>
{_verdicts(matrix)}
<p></p>{_choices_html(matrix)}
<p id="controls"><label>Filter <input id="filter" type="search" placeholder="name, family, parser (sglang:none)">
</label> <label><input id="failures-only" type="checkbox"> misses only</label> <small id="shown"></small></p>
<table id="templates" data-rows="{len(matrix.rows)}"><thead><tr>{head}</tr></thead>
<tbody>
{body}
</tbody></table>
<script>{TABLE_JS}</script>
</body></html>
"""


def write_matrix(matrix: Matrix, out_dir: Path) -> Path:
    """matrix.json, matrix.html and summary.md in `out_dir`; the page's path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "matrix.json").write_text(json.dumps(matrix_to_json(matrix), ensure_ascii=False) + "\n",
                                         encoding="utf-8", errors="surrogateescape")
    (out_dir / "summary.md").write_text(summary_markdown(matrix), encoding="utf-8")
    page = out_dir / "matrix.html"
    page.write_text(render_html(matrix), encoding="utf-8", errors="surrogateescape")
    return page


# --- what changed since an earlier matrix (the nightly job's part) --------------------------------------------------

def _counts(cell: Cell | None) -> str:
    if cell is None:
        return "not run"
    return f"{cell.rendered[0]}/{cell.rendered[1]} + {cell.variants[0]}/{cell.variants[1]} var."


def matrix_changes(old: Matrix, new: Matrix) -> str:
    """Markdown: each template × engine cell whose counts or parser choice differ between two matrices (a template
    in one of them only is new or gone), and the two summaries; "no change" when none differ."""
    before = {r.template: r for r in old.rows}
    after = {r.template: r for r in new.rows}
    lines = []
    for name in sorted(before.keys() | after.keys()):
        a, b = before.get(name), after.get(name)
        if a is None or b is None:
            lines.append(f"| `{name}` | (all) | {'new' if a is None else 'gone'} | |")
            continue
        for engine in sorted(a.cells.keys() | b.cells.keys()):
            x, y = a.cells.get(engine), b.cells.get(engine)
            if (x and (x.choice, x.rendered, x.variants)) != (y and (y.choice, y.rendered, y.variants)):
                chosen = x is not None and y is not None and x.choice != y.choice
                was = _counts(x) + (f" ({x.choice or 'no parser'})" if chosen and x else "")
                now = _counts(y) + (f" ({y.choice or 'no parser'})" if chosen and y else "")
                lines.append(f"| `{name}` | {engine} | {was} | {now} |")
    if not lines:
        return "## The cross-engine matrix\n\nNo cell changed since the previous matrix.\n"
    return ("## The cross-engine matrix\n\nCells that changed since the previous matrix (rendered outputs read as "
            "meant + realistic variants):\n\n| template | engine | before | now |\n|---|---|---|---|\n"
            + "\n".join(lines) + "\n\nBefore:\n\n" + summary_markdown(old) + "\nNow:\n\n" + summary_markdown(new))
