"""`autoparser corpus report`: one self-contained HTML page and a Markdown summary over the whole corpus.

Per template: its family, formats and markers (from the analyzer and `generate`), the llama.cpp built-in
format its text maps to without --jinja (autoparser.builtin), the round-trip scenario
results (autoparser.corpus.roundtrip), the size of the one-tool grammar, and which artefacts differ from the
committed snapshot (autoparser.corpus.artefacts + snapshots/<key>/<file>).

Collecting never stops at one bad template: each stage's exception is recorded in the row's `errors` and the
report carries on. Rendering is pure (rows in, text out) and escapes every piece of corpus-derived text.

The HTML page needs no network and no JavaScript to read: it is a plain table in name order with <details>
for markers and diffs. A few lines of inline JS make the headers sortable (click, or `#sort=<key>` /
`#sort=-<key>` in the URL to sort on load; the table then carries `data-sorted`, which the browser test reads).

Family rule (documented in the page too): the first known family keyword among the name tokens of the model
part of the entry's model_hint / repo_id / name (text after "/" or after the first "__"), by position; if the
model part names none, the same search over the org / package part, then a small org table; else "other".
"""

from __future__ import annotations

import datetime
import difflib
import fnmatch
import html
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autoparser.builtin import detect_builtin
from autoparser.corpus import Corpus, CorpusEntry
from autoparser.corpus.artefacts import (
    ANALYSIS_FILE,
    GRAMMAR_REQUESTS,
    RESPONSE_TEMPLATE_FILE,
    ROUNDTRIP_FILE,
    snapshot_key,
    template_artefacts,
)
from autoparser.corpus.constrained import BEAM, CONSUMERS, CONSUMERS_FILE
from autoparser.corpus.exported import transformers_results
from autoparser.corpus.manifest import atomic_write_bytes
from autoparser.corpus.mutations import recovery_counts
from autoparser.corpus.roundtrip import SCENARIOS
from autoparser.corpus.workers import map_templates
from autoparser.params import generate
from autoparser.template.sandbox import time_budget

__all__ = [
    "PAGE_CSS",
    "TABLE_JS",
    "ArtefactChange",
    "CppDivergences",
    "ScenarioCell",
    "TemplateRow",
    "collect_row",
    "collect_rows",
    "family_of",
    "html_text",
    "page_head",
    "render_html",
    "render_markdown",
    "summarize",
    "write_report",
]

STATUSES = ("pass", "fail", "not_expressible", "error")
_DIFF_LINES = 40  # unified-diff excerpt per changed artefact; the full text is in the artefacts themselves
_DETAIL_CHARS = 400

# The one-tool grammar is the "grammar size" column (the no-tools grammar is usually empty).
_ONE_TOOL_GRAMMAR = "grammar-one-tool.gbnf"


# --- rows ---------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ScenarioCell:
    scenario: str
    status: str  # pass | fail | not_expressible | error
    detail: str = ""


@dataclass(frozen=True)
class ArtefactChange:
    artefact: str
    kind: str  # changed | new | missing
    diff: str = ""  # unified-diff excerpt (changed only)


@dataclass(frozen=True)
class TemplateRow:
    name: str
    family: str
    model: str = ""  # repo id / model hint / package source, for display
    origins: tuple[str, ...] = ()  # where its text comes from: hub repo (#template or #file.gguf), seed, package
    handler: str = ""  # "autoparser" or the specialised handler's name
    chat_format: str = ""  # ChatParams.format of the one-tool request
    builtin: str = ""  # the llama.cpp built-in format its legacy (no --jinja) path detects; "none": rejected
    reasoning: str = ""  # reasoning mode (analysis)
    content: str = ""  # content mode
    tools: str = ""  # tool-call format
    markers: tuple[tuple[str, str], ...] = ()  # (field, marker text), non-empty markers only
    scenarios: tuple[ScenarioCell, ...] = ()
    grammar_size: int | None = None  # characters of the one-tool GBNF grammar; None when not generated
    grammar_rules: int | None = None
    recovered: tuple[int, int] | None = None  # mutated outputs read as meant, of how many (corpus/mutations.py)
    export: str = ""  # "exported", or why its response_template cannot be (autoparser/export)
    transformers: tuple[int, int] | None = None  # scenarios transformers parses right with the export, of how many
    constrained: str = ""  # "exported", or why a structural tag / Lark export is not (its consumers' record)
    # per consumer (xgrammar, llguidance): intended outputs it accepts, of how many; broken ones it rejects, of how many
    consumers: tuple[tuple[str, int, int, int, int], ...] = ()
    snapshot: str = "unavailable"  # same | changed | none (no snapshot folder) | unavailable (not computed)
    changes: tuple[ArtefactChange, ...] = ()
    errors: tuple[str, ...] = ()

    def status_of(self, scenario: str) -> str:
        for c in self.scenarios:
            if c.scenario == scenario:
                return c.status
        return ""

    def count(self, status: str) -> int:
        return sum(1 for c in self.scenarios if c.status == status)

    @property
    def expressible(self) -> int:
        """The scenarios this template can express: what its pass rate is over."""
        return sum(1 for c in self.scenarios if c.status != "not_expressible")

    @property
    def failing(self) -> bool:
        return bool(self.errors) or any(c.status in ("fail", "error") for c in self.scenarios)


# --- family -------------------------------------------------------------------------------------------------------

# keyword (prefix of a name token) -> family. Token = run of [a-z0-9] in the lower-cased name.
_FAMILY_KEYWORDS: tuple[tuple[str, str], ...] = (
    ("qwen", "Qwen"), ("qwq", "Qwen"),
    ("llama", "Llama"), ("tinyllama", "Llama"), ("codellama", "Llama"),
    ("mistral", "Mistral"), ("mixtral", "Mistral"), ("ministral", "Mistral"), ("pixtral", "Mistral"),
    ("magistral", "Mistral"), ("devstral", "Mistral"), ("codestral", "Mistral"),
    ("gemma", "Gemma"), ("deepseek", "DeepSeek"), ("phi", "Phi"),
    ("command", "Command"), ("c4ai", "Command"), ("cohere", "Command"), ("aya", "Command"),
    ("granite", "Granite"), ("glm", "GLM"), ("chatglm", "GLM"), ("kimi", "Kimi"), ("minimax", "MiniMax"),
    ("hermes", "Hermes"), ("nemotron", "Nemotron"), ("exaone", "EXAONE"), ("falcon", "Falcon"),
    ("yi", "Yi"), ("internlm", "InternLM"), ("olmo", "OLMo"), ("smollm", "SmolLM"), ("lfm", "LFM"),
    ("jamba", "Jamba"), ("functionary", "Functionary"), ("hunyuan", "Hunyuan"), ("ernie", "ERNIE"),
    ("baichuan", "Baichuan"), ("llava", "LLaVA"), ("ling", "Ling"), ("step", "StepFun"), ("apertus", "Apertus"),
    ("seed", "Seed"), ("gpt", "GPT"), ("chatml", "ChatML"), ("alpaca", "Alpaca"), ("vicuna", "Vicuna"),
    ("zephyr", "Zephyr"), ("openchat", "OpenChat"), ("solar", "Solar"), ("dolphin", "Dolphin"),
    ("metharme", "Metharme"), ("pythia", "Pythia"), ("salamandra", "Salamandra"), ("aquila", "Aquila"),
    ("ring", "Ling"), ("minicpm", "MiniCPM"), ("mimo", "MiMo"), ("kanana", "Kanana"), ("internvl", "InternLM"),
    ("arcee", "Arcee"), ("trinity", "Arcee"), ("virtuoso", "Arcee"), ("mellum", "Mellum"),
    ("nanbeige", "Nanbeige"), ("motif", "Motif"), ("fanar", "Fanar"), ("orion", "Orion"),
)
_FAMILY_ORGS: Mapping[str, str] = {
    "meta-llama": "Llama", "mistralai": "Mistral", "google": "Gemma", "deepseek-ai": "DeepSeek",
    "microsoft": "Phi", "coherelabs": "Command", "cohereforai": "Command", "ibm-granite": "Granite",
    "thudm": "GLM", "zai-org": "GLM", "moonshotai": "Kimi", "nousresearch": "Hermes", "nvidia": "Nemotron",
    "lgai-exaone": "EXAONE", "tiiuae": "Falcon", "01-ai": "Yi", "internlm": "InternLM", "allenai": "OLMo",
    "huggingfacetb": "SmolLM", "liquidai": "LFM", "openai": "GPT", "bytedance-seed": "Seed",
    "inclusionai": "Ling", "arcee-ai": "Arcee", "tencent": "Hunyuan", "kakaocorp": "Kanana", "openbmb": "MiniCPM",
    "xiaomimimo": "MiMo", "opengvlab": "InternLM", "jetbrains": "Mellum",
}


def _keyword_family(text: str) -> str | None:
    best: tuple[int, int, str] | None = None  # (position, -keyword length, family)
    for m in re.finditer(r"[a-z0-9]+", text.lower()):
        tok = m.group(0)
        for kw, fam in _FAMILY_KEYWORDS:
            if tok.startswith(kw) and (kw != "yi" or re.fullmatch(r"yi\d*", tok)) and (kw != "gpt" or "oss" in text.lower()):
                cand = (m.start(), -len(kw), fam)
                if best is None or cand < best:
                    best = cand
    return best[2] if best else None


def family_of(entry: CorpusEntry) -> str:
    """See the module docstring for the rule."""
    label = entry.model_hint or entry.repo_id or ""
    if "/" in label:
        org, _, model = label.partition("/")
    else:
        org, sep, model = entry.name.partition("__")
        if not sep:
            org, model = "", entry.name
    return _keyword_family(model) or _keyword_family(org) or _FAMILY_ORGS.get(org.lower(), "other")


def _model_label(entry: CorpusEntry) -> str:
    return entry.model_hint or entry.repo_id or entry.source_file or (entry.origins[0] if entry.origins else "")


# --- collecting ---------------------------------------------------------------------------------------------------

def _err(stage: str, e: BaseException) -> str:
    text = str(e).strip().replace("\n", " ")
    return f"{stage}: {type(e).__name__}: {text[:_DETAIL_CHARS]}"


def _name(v: Any) -> str:
    return str(getattr(v, "value", v))


# The markers a report compares, by sub-record of an analysis record: the label's prefix, the sub-record's path,
# its marker keys (in the report's order).
_MARKER_FIELDS = (
    ("reasoning", ("reasoning",), ("start", "end")),
    ("content", ("content",), ("start", "end")),
    ("tools", ("tools", "format"), ("section_start", "section_end", "per_call_start", "per_call_end")),
    ("function", ("tools", "function"), ("name_prefix", "name_suffix", "close")),
    ("arguments", ("tools", "arguments"), ("start", "end", "name_prefix", "value_prefix")),
    ("call_id", ("tools", "call_id"), ("prefix",)),
)


def _markers(d: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """Non-empty markers of an analysis record (`TemplateAnalysis.to_dict()` / analysis.json)."""
    out: list[tuple[str, str]] = []
    for prefix, path, keys in _MARKER_FIELDS:
        sub: Any = d
        for step in path:
            sub = sub.get(step, {})
        if isinstance(sub, dict):
            out.extend((f"{prefix}.{key}", str(sub[key])) for key in keys if sub.get(key))
    return tuple(out)


def _analysis_fields(d: Mapping[str, Any]) -> dict[str, Any]:
    return {"reasoning": str(d["reasoning"]["mode"]), "content": str(d["content"]["mode"]),
            "tools": str(d["tools"]["format"]["mode"]), "markers": _markers(d)}


def _artefact_error(text: str) -> str | None:
    """"Type: message" when a JSON artefact records its stage's failure ({"error": {...}}), else None."""
    try:
        d = json.loads(text)
    except ValueError:
        return None
    if isinstance(d, dict) and isinstance(d.get("error"), dict):
        return f"{d['error'].get('type', 'Error')}: {str(d['error'].get('message', ''))[:_DETAIL_CHARS]}"
    return None


def _rule_count(grammar: str) -> int:
    return sum(1 for line in grammar.splitlines() if "::=" in line)


def _read_snapshot(path: Path) -> str | None:
    try:
        return path.read_bytes().decode("utf-8", "surrogateescape")
    except OSError:
        return None


def _diff_excerpt(old: str, new: str, name: str) -> str:
    lines = list(difflib.unified_diff(old.splitlines(), new.splitlines(), f"snapshot/{name}", f"now/{name}",
                                      lineterm="", n=1))
    if len(lines) > _DIFF_LINES:
        lines = [*lines[:_DIFF_LINES], f"... ({len(lines) - _DIFF_LINES} more diff lines)"]
    return "\n".join(lines)


def compare_snapshot(artefacts: Mapping[str, str], folder: Path) -> tuple[str, tuple[ArtefactChange, ...]]:
    """(same | changed | none, changes) of freshly computed artefacts against snapshots/<key>/ on disk."""
    if not folder.is_dir():
        return "none", ()
    changes: list[ArtefactChange] = []
    # (the consumers' record is written where they run, not computed here: `_consumer_fields` reads it)
    on_disk = {p.name for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")} - {CONSUMERS_FILE}
    for name in sorted(set(artefacts) | on_disk):
        now = artefacts.get(name)
        old = _read_snapshot(folder / name) if name in on_disk else None
        if now is None:
            changes.append(ArtefactChange(name, "missing"))
        elif old is None:
            changes.append(ArtefactChange(name, "new"))
        elif old != now:
            changes.append(ArtefactChange(name, "changed", _diff_excerpt(old, now, name)))
    return ("changed" if changes else "same"), tuple(changes)


def collect_row(entry: CorpusEntry, snapshots_dir: Path | None) -> TemplateRow:
    """Everything the report shows about one template; each failing stage adds to `errors`.

    The analysis, the one-tool grammar and the round-trip results are read from the artefacts (computed once,
    and exactly what the snapshots hold), so the report and the snapshot suite can never disagree.
    """
    errors: list[str] = []
    fields: dict[str, Any] = {"name": entry.name, "family": family_of(entry), "model": _model_label(entry),
                              "origins": tuple(entry.origins)}
    try:
        source = entry.read_text()
    except Exception as e:
        return TemplateRow(**fields, errors=(_err("read", e),))
    arts = template_artefacts(source)  # never raises: a failing stage is an error artefact
    fields["builtin"] = detect_builtin(source).label  # (substring checks on the text: nothing rendered)

    failed = _artefact_error(arts[ANALYSIS_FILE])
    if failed:
        errors.append(f"analysis: {failed}")
    else:
        fields.update(_analysis_fields(json.loads(arts[ANALYSIS_FILE])))

    # handler and chat format: the one-tool grammar's request, generated again (cached analysis: cheap)
    try:
        params = generate(source, GRAMMAR_REQUESTS[_ONE_TOOL_GRAMMAR])
        fields.update(handler=params.handler, chat_format=_name(params.format),
                      grammar_size=len(params.grammar), grammar_rules=_rule_count(params.grammar))
    except Exception as e:  # the artefact records the same failure; the row names the stage
        errors.append(_err("generate", e))

    failed = _artefact_error(arts[ROUNDTRIP_FILE])
    if failed:
        errors.append(f"roundtrip: {failed}")
    else:
        fields["scenarios"] = tuple(
            ScenarioCell(str(r["scenario"]), str(r["status"]), str(r.get("detail") or "")[:_DETAIL_CHARS])
            for r in json.loads(arts[ROUNDTRIP_FILE]))

        fields["recovered"] = recovery_counts(source)

    exported = json.loads(arts[RESPONSE_TEMPLATE_FILE])
    fields["export"] = str(exported.get("not_expressible") or exported.get("error", {}).get("message") or "exported")
    if fields["export"] == "exported":
        try:
            checked = transformers_results(entry.name, source)
            fields["transformers"] = (sum(v is None for v in checked.values()), len(checked))
        except ImportError:  # transformers is in the test extra: without it, the column shows the export alone
            pass

    if snapshots_dir is not None:
        folder = snapshots_dir / snapshot_key(entry)
        fields["snapshot"], fields["changes"] = compare_snapshot(arts, folder)
        fields.update(_consumer_fields(folder / CONSUMERS_FILE))
    return TemplateRow(**fields, errors=tuple(errors))


def _consumer_fields(path: Path) -> dict[str, Any]:
    """The consumers' record of a template (written where xgrammar and llguidance run), as row fields."""
    text = _read_snapshot(path)
    if text is None:
        return {}
    record = json.loads(text)
    return {"constrained": str(record["export"]),
            "consumers": tuple((c, *(int(record[c][k]) for k in ("accepted", "intended", "rejected", "broken")))
                               for c in (*CONSUMERS, BEAM) if c in record)}


def _collect_one(args: tuple[CorpusEntry, Path | None]) -> TemplateRow:
    entry, snapshots_dir = args
    try:
        with time_budget(phase=f"collecting {entry.name}"):  # one budget per template: a hostile one costs that
            return collect_row(entry, snapshots_dir)
    except BaseException as e:  # RecursionError, SystemExit from a template... never lose the whole report
        if isinstance(e, KeyboardInterrupt):
            raise
        return TemplateRow(name=entry.name, family=family_of(entry), errors=(_err("collect", e),))


def select_entries(corpus: Corpus, names: Iterable[str] | None = None, limit: int | None = None
                   ) -> tuple[CorpusEntry, ...]:
    """Entries named (exact names or fnmatch patterns such as "Qwen__*", in corpus order), then the first
    `limit` of them."""
    entries = corpus.entries
    if names is not None:
        wanted = list(names)
        entries = tuple(e for e in entries if any(w == e.name or fnmatch.fnmatchcase(e.name, w) for w in wanted))
    if limit is not None:
        entries = entries[:max(limit, 0)]
    return entries


def collect_rows(corpus: Corpus, snapshots_dir: Path | str | None, *, names: Iterable[str] | None = None,
                 limit: int | None = None, jobs: int = 1,
                 progress: Callable[[int, int], None] | None = None) -> list[TemplateRow]:
    """One row per selected template, in corpus (name) order. jobs > 1 uses worker processes."""
    snaps = Path(snapshots_dir) if snapshots_dir is not None else None
    entries = select_entries(corpus, names, limit)
    return map_templates(_collect_one, [(e, snaps) for e in entries], jobs=jobs, chunksize=4, progress=progress)


# --- summary ------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Summary:
    templates: int
    with_errors: int
    scenarios: tuple[str, ...]
    by_scenario: Mapping[str, Mapping[str, int]]  # scenario -> status -> count
    totals: Mapping[str, int]  # status -> count over all scenarios
    snapshot: Mapping[str, int]  # same | changed | none | unavailable -> count
    families: tuple[tuple[str, int], ...] = field(default=())
    recovered: tuple[int, int] = (0, 0)  # mutated outputs read as meant, of how many, over all templates


def _scenarios(rows: Sequence[TemplateRow]) -> tuple[str, ...]:
    """The scenarios present in rows, in SCENARIOS order, unknown ones after."""
    known = SCENARIOS
    seen: dict[str, None] = {}
    for r in rows:
        for c in r.scenarios:
            seen.setdefault(c.scenario)
    order = {s: i for i, s in enumerate(known)}
    return tuple(sorted(seen, key=lambda s: (order.get(s, len(order)), list(seen).index(s))))


def summarize(rows: Sequence[TemplateRow]) -> Summary:
    scenarios = _scenarios(rows)
    by_scenario = {s: {st: sum(1 for r in rows if r.status_of(s) == st) for st in STATUSES} for s in scenarios}
    totals = {st: sum(r.count(st) for r in rows) for st in STATUSES}
    snap = Counter(r.snapshot for r in rows)
    fam = Counter(r.family for r in rows)
    return Summary(
        templates=len(rows), with_errors=sum(1 for r in rows if r.errors), scenarios=scenarios,
        by_scenario=by_scenario, totals=totals,
        snapshot={k: snap.get(k, 0) for k in ("same", "changed", "none", "unavailable")},
        families=tuple(sorted(fam.items(), key=lambda kv: (-kv[1], kv[0]))),
        recovered=(sum(r.recovered[0] for r in rows if r.recovered),
                   sum(r.recovered[1] for r in rows if r.recovered)),
    )


def summary_line(rows: Sequence[TemplateRow]) -> str:
    s = summarize(rows)
    t = s.totals
    return (f"{s.templates} templates ({s.with_errors} with errors); scenarios: {t['pass']} pass, {t['fail']} fail,"
            f" {t['not_expressible']} not expressible, {t['error']} error; mutated outputs recovered:"
            f" {_recovered_text(s.recovered) or 'none'}; snapshot: {s.snapshot['changed']} changed,"
            f" {s.snapshot['none']} without snapshot")


# --- HTML ---------------------------------------------------------------------------------------------------------

def html_text(text: object) -> str:
    """`text` escaped for HTML (an attribute's value too)."""
    # surrogateescape'd bytes from a template cannot be encoded: show them as U+FFFD instead of failing
    return html.escape(str(text).encode("utf-8", "replace").decode("utf-8"), quote=True)


# (the cross-engine matrix's page, autoparser.matrix.page, has the same look and the same table script)
PAGE_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1em;color:#111}
table{border-collapse:collapse}
#templates{width:100%}
th,td{border:1px solid #ccc;padding:2px 5px;vertical-align:top;text-align:left}
th{background:#eee;position:sticky;top:0}
th[data-key]{cursor:pointer}
th[aria-sort=ascending]::after{content:" \\25B2"}
th[aria-sort=descending]::after{content:" \\25BC"}
td.num{text-align:right}
#templates td:first-child{max-width:26em;word-break:break-word}
#templates td:first-child small{color:#555;word-break:break-all}
.pass{background:#d8f5d8}.fail{background:#f8d0d0}.error{background:#f5b0b0}.not_expressible{background:#eee}
.changed{background:#fde9b8}.none{color:#777}
code,pre{font:12px ui-monospace,monospace;white-space:pre-wrap;word-break:break-all}
summary{cursor:pointer}
details.cell small{display:block;max-width:24em;white-space:pre-wrap;word-break:break-word}
#controls{position:sticky;top:0;background:#fff;padding:.3em 0;z-index:2}
tr[hidden]{display:none}
"""

# Sort on header click (toggles asc/desc) and on load from #sort=<key> or #sort=-<key>. Cells carry data-v
# (numbers for numeric columns); rows are re-appended in the new order. Without JS the table is in name order.
TABLE_JS = """
(function(){
var t=document.getElementById('templates');if(!t)return;var b=t.tBodies[0];
var hs=Array.prototype.slice.call(t.tHead.rows[0].cells);
function sortBy(key,desc){var i=-1;hs.forEach(function(h,j){if(h.dataset.key===key)i=j;});if(i<0)return;
var num=hs[i].dataset.type==='num';var rows=Array.prototype.slice.call(b.rows);
rows.sort(function(x,y){var a=x.cells[i].dataset.v,c=y.cells[i].dataset.v;
var r=num?(parseFloat(a)||0)-(parseFloat(c)||0):a.localeCompare(c);
if(r===0)r=x.cells[0].dataset.v.localeCompare(y.cells[0].dataset.v);return desc?-r:r;});
rows.forEach(function(r){b.appendChild(r);});
hs.forEach(function(h){h.removeAttribute('aria-sort');});
hs[i].setAttribute('aria-sort',desc?'descending':'ascending');t.setAttribute('data-sorted',(desc?'-':'')+key);}
hs.forEach(function(h){if(!h.dataset.key)return;h.addEventListener('click',function(){
sortBy(h.dataset.key,h.getAttribute('aria-sort')==='ascending');});});
var m=/[#&]sort=(-?)([A-Za-z0-9_.:-]+)/.exec(location.hash);if(m)sortBy(m[2],m[1]==='-');
var q=document.getElementById('filter'),f=document.getElementById('failures-only'),n=document.getElementById('shown');
function apply(){var s=q.value.toLowerCase().trim(),k=0;Array.prototype.forEach.call(b.rows,function(r){
var hide=(s&&r.dataset.search.indexOf(s)<0)||(f.checked&&r.dataset.failing!=='1');r.hidden=hide;if(!hide)k++;});
t.setAttribute('data-shown',k);n.textContent=k+' of '+b.rows.length+' templates shown';}
var fm=/[#&]filter=([^&]*)/.exec(location.hash);if(fm)q.value=decodeURIComponent(fm[1]);
if(/[#&]failures(&|$)/.test(location.hash))f.checked=true;
q.addEventListener('input',apply);f.addEventListener('change',apply);apply();
})();
"""


@dataclass(frozen=True)
class _Col:
    key: str
    title: str
    numeric: bool = False


def _columns(scenarios: Sequence[str]) -> list[_Col]:
    return [
        _Col("name", "Template"), _Col("family", "Family"), _Col("handler", "Handler"),
        _Col("chat_format", "Format"), _Col("builtin", "Built-in"), _Col("reasoning", "Reasoning"), _Col("content", "Content"),
        _Col("tools", "Tool calls"), _Col("markers", "Markers", numeric=True),
        *(_Col(f"scenario:{s}", s) for s in scenarios),
        _Col("passed", "Pass", numeric=True), _Col("recovered", "Recovered", numeric=True),
        _Col("export", "HF export", numeric=True), _Col("constrained", "Strict tools", numeric=True),
        _Col("grammar_size", "Grammar size", numeric=True),
        _Col("snapshot", "Since snapshot"), _Col("errors", "Errors", numeric=True),
    ]


_SHORT_STATUS = {"pass": "pass", "fail": "FAIL", "not_expressible": "n/e", "error": "ERROR"}


def _share(counts: tuple[int, int] | None) -> float | None:
    return counts[0] / counts[1] if counts and counts[1] else None


def _recovered_text(counts: tuple[int, int] | None) -> str:
    """`12/14 (86%)`; empty when no mutated output applies."""
    share = _share(counts)
    return "" if share is None or counts is None else f"{counts[0]}/{counts[1]} ({share:.0%})"


def _td(value: str, body: str, cls: str = "") -> str:
    c = f' class="{html_text(cls)}"' if cls else ""
    return f'<td{c} data-v="{html_text(value)}">{body}</td>'


def _row_html(r: TemplateRow, scenarios: Sequence[str]) -> str:
    cells = [
        _td(r.name, f"<b>{html_text(r.name)}</b><br><small>{html_text(r.model)}</small>" + (
            f"<details><summary><small>{len(r.origins)} origin{'s' if len(r.origins) != 1 else ''}</small></summary>"
            f"<ul>{''.join(f'<li><code>{html_text(o)}</code></li>' for o in r.origins)}</ul></details>"
            if r.origins else "")),
        _td(r.family, html_text(r.family)), _td(r.handler, html_text(r.handler)),
        _td(r.chat_format, html_text(r.chat_format)),
        _td(r.builtin, html_text(r.builtin)),
        _td(r.reasoning, html_text(r.reasoning)), _td(r.content, html_text(r.content)),
        _td(r.tools, html_text(r.tools)),
    ]
    if r.markers:
        items = "".join(f"<li>{html_text(k)}: <code>{html_text(json.dumps(v, ensure_ascii=False))}</code></li>"
                        for k, v in r.markers)
        cells.append(_td(str(len(r.markers)),
                         f"<details><summary>{len(r.markers)}</summary><ul>{items}</ul></details>", "num"))
    else:
        cells.append(_td("0", "0", "num"))
    for s in scenarios:
        cell = next((c for c in r.scenarios if c.scenario == s), None)
        if cell is None:
            cells.append(_td("", ""))
        else:
            short = _SHORT_STATUS.get(cell.status, cell.status)
            # what failed, on click (a tooltip alone hides it from keyboards, touch screens and copy-paste)
            body = (f'<details class="cell"><summary>{html_text(short)}</summary>'
                    f"<small>{html_text(cell.detail)}</small></details>") if cell.detail else html_text(short)
            cells.append(_td(cell.status, body, cell.status))
    # the pass rate over the scenarios the template can express (a template without tools cannot fail a call)
    total = r.expressible
    pass_share = f"{r.count('pass') / total:.4f}" if total else "-1"
    cells.append(_td(pass_share, f"{r.count('pass')}/{total}" if total else "", "num"))
    share = _share(r.recovered)
    cells.append(_td("-1" if share is None else f"{share:.4f}", _recovered_text(r.recovered), "num"))
    cells.append(_export_cell(r))
    cells.append(_constrained_cell(r))
    gs = "" if r.grammar_size is None else str(r.grammar_size)
    cells.append(_td(gs or "-1", f"{gs}<br><small>{r.grammar_rules} rules</small>" if gs else "", "num"))
    if r.changes:
        items = "".join(
            f"<li>{html_text(c.kind)}: <code>{html_text(c.artefact)}</code>"
            + (f"<pre>{html_text(c.diff)}</pre>" if c.diff else "") + "</li>" for c in r.changes)
        body = f"<details><summary>{html_text(r.snapshot)} ({len(r.changes)})</summary><ul>{items}</ul></details>"
    else:
        body = html_text(r.snapshot)
    cells.append(_td(r.snapshot, body, r.snapshot))
    if r.errors:
        items = "".join(f"<li><code>{html_text(x)}</code></li>" for x in r.errors)
        cells.append(_td(str(len(r.errors)),
                         f"<details><summary>{len(r.errors)}</summary><ul>{items}</ul></details>", "num error"))
    else:
        cells.append(_td("0", "", "num"))
    search = " ".join((r.name, r.family, r.handler, r.model, r.tools)).lower()
    return (f'<tr id="t-{html_text(r.name)}" data-search="{html_text(search)}" data-failing="{int(r.failing)}">'
            + "".join(cells) + "</tr>")


def _export_cell(r: TemplateRow) -> str:
    """The response_template column: the share of scenarios transformers parses right with it, or why none."""
    if r.export != "exported":
        why = f'<details class="cell"><summary>n/e</summary><small>{html_text(r.export)}</small></details>'
        return _td("-1", why if r.export else "", "not_expressible")
    share = _share(r.transformers)
    return _td("2" if share is None else f"{share:.4f}", _recovered_text(r.transformers) or "exported", "num")


def _constrained_cell(r: TemplateRow) -> str:
    """The structural tag / Lark column: per consumer, the intended outputs it accepts under the export (sorted by
    the lower share), the broken ones it rejects in the tooltip; or why the template's requests do not export."""
    intended = [(c, a, n, rj, b) for c, a, n, rj, b in r.consumers if n]
    if not any(c in CONSUMERS for c, *_ in intended):  # (beam's line reads the response_template, not this export)
        if not r.constrained:
            return _td("-2", "", "")
        why = f'<details class="cell"><summary>n/e</summary><small>{html_text(r.constrained)}</small></details>'
        return _td("-1", why, "not_expressible")
    share = min(a / n for c, a, n, _, _ in intended if c in CONSUMERS)
    lines = "<br>".join(f'<span title="{html_text(f"rejects {rj}/{b} broken outputs")}">{html_text(c)} {a}/{n}</span>'
                        for c, a, n, rj, b in intended)
    return _td(f"{share:.4f}", lines, "num")


def page_head(title: str, css: str = "") -> str:
    """A self-contained page's start up to its `</head>`: no external resource may load (the policy), the
    report's look (PAGE_CSS) and `css` added to it."""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<title>{html_text(title)}</title><style>{PAGE_CSS}{css}</style></head>"""


def render_html(rows: Sequence[TemplateRow], *, title: str = "autoparser corpus report", made_from: str = "") -> str:
    """A self-contained page (inline CSS/JS, no external resources), readable with JavaScript off. `made_from`:
    the commit and date it was made from (`made_from()`)."""
    s = summarize(rows)
    cols = _columns(s.scenarios)
    # scenario names wrap at their underscores; the full name stays in the tooltip
    head = "".join(
        f'<th data-key="{html_text(c.key)}" title="{html_text(c.title)}"' + (' data-type="num"' if c.numeric else "")
        + f">{html_text(c.title.replace('_', ' ') if c.key.startswith('scenario:') else c.title)}</th>"
        for c in cols)
    body = "\n".join(_row_html(r, s.scenarios) for r in rows)
    scen_rows = "".join(
        f"<tr><td>{html_text(sc)}</td>" + "".join(f'<td class="num">{s.by_scenario[sc][st]}</td>' for st in STATUSES)
        + "</tr>" for sc in s.scenarios)
    fams = ", ".join(f"{html_text(f)} {n}" for f, n in s.families)
    return f"""{page_head(title)}
<body>
<h1>{html_text(title)}</h1>
<p id="made-from"><small>{html_text(made_from)}</small></p>
<p id="summary" data-templates="{s.templates}" data-errors="{s.with_errors}" data-pass="{s.totals['pass']}"
 data-fail="{s.totals['fail']}">{html_text(summary_line(rows))}</p>
<table id="scenario-summary"><thead><tr><th>Scenario</th>{"".join(f"<th>{html_text(st)}</th>" for st in STATUSES)}
</tr></thead>
<tbody>{scen_rows}</tbody></table>
<p><small>Families: {fams}</small></p>
<p><small>Family = first known family keyword in the model name (repo id / model hint / template name), else in
its org or package, else "other". Grammar size = characters of the GBNF grammar for a one-tool request.
Built-in = the format llama.cpp renders the template as without --jinja (its built-in formats, detected from the
text; none = rejected). Recovered = the outputs of the scenarios read right, broken the ways models break them (last closer cut, text
after the calls, first call opener left out, reasoning start repeated), that the default parse still reads as
meant. HF export = the scenarios transformers' own parser reads as meant with the exported response_template.
Strict tools = the scenarios' intended outputs xgrammar and llguidance accept under the exported structural tag
and Lark grammar (hover: the broken outputs they reject), from the consumers' record in snapshots/&lt;key&gt;/. Since snapshot = artefacts compared with snapshots/&lt;key&gt;/. Scenario cells: pass, FAIL, ERROR, n/e = not
expressible by this template (click FAIL or ERROR for what went wrong). Pass = passed of the expressible scenarios.
Click a header to sort; the address can hold #sort=KEY (or -KEY), filter=TEXT and failures.</small></p>
<p id="controls"><label>Filter <input id="filter" type="search" placeholder="name, family, handler, model"></label>
<label><input id="failures-only" type="checkbox"> failures only</label> <small id="shown"></small></p>
<table id="templates" data-rows="{len(rows)}"><thead><tr>{head}</tr></thead>
<tbody>
{body}
</tbody></table>
<script>{TABLE_JS}</script>
</body></html>
"""


# --- Markdown -----------------------------------------------------------------------------------------------------

def _md(text: object) -> str:
    """A table-cell-safe rendering: pipes, backticks, angle brackets and newlines cannot break the table."""
    out = str(text).encode("utf-8", "replace").decode("utf-8")
    out = out.replace("\\", "\\\\").replace("|", "\\|").replace("`", "\\`").replace("\r", " ").replace("\n", " ")
    return out.replace("<", "&lt;").replace(">", "&gt;")


def render_markdown(rows: Sequence[TemplateRow], *, title: str = "autoparser corpus report",
                    made_from: str = "") -> str:
    s = summarize(rows)
    lines = [f"# {_md(title)}", "", *([_md(made_from), ""] if made_from else []), summary_line(rows), ""]
    if s.scenarios:
        lines += ["| scenario | " + " | ".join(STATUSES) + " |", "|---" * (len(STATUSES) + 1) + "|"]
        lines += [f"| {_md(sc)} | " + " | ".join(str(s.by_scenario[sc][st]) for st in STATUSES) + " |"
                  for sc in s.scenarios]
        lines.append("")
    lines += ["Families: " + ", ".join(f"{_md(f)} {n}" for f, n in s.families), ""]
    changed = [r for r in rows if r.changes]
    if changed:
        lines += ["## Changed since the last snapshot", ""]
        lines += [f"- {_md(r.name)}: " + ", ".join(f"{_md(c.artefact)} ({c.kind})" for c in r.changes)
                  for r in changed]
        lines.append("")
    failing = [r for r in rows if r.errors]
    if failing:
        lines += ["## Errors", ""]
        lines += [f"- {_md(r.name)}: {_md('; '.join(r.errors))}" for r in failing]
        lines.append("")
    lines += ["## Templates", "",
              "| template | origins | family | handler | format | built-in | reasoning | tools | pass | recovered |"
              " grammar | snapshot |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        passed = f"{r.count('pass')}/{r.expressible}" if r.expressible else ""
        gs = "" if r.grammar_size is None else str(r.grammar_size)
        lines.append(f"| {_md(r.name)} | {_md(', '.join(r.origins))} | {_md(r.family)} | {_md(r.handler)} | {_md(r.chat_format)} |"
                     f" {_md(r.builtin)} | {_md(r.reasoning)} | {_md(r.tools)} | {passed} | {_md(_recovered_text(r.recovered))} |"
                     f" {gs} | {_md(r.snapshot)} |")
    return "\n".join(lines) + "\n"


def made_from(where: Path, now: datetime.datetime | None = None) -> str:
    """"made from commit 1a2b3c4d5e6f on 2026-11-25 23:40 UTC": the git commit of the checkout `where` is in
    (with "+ local changes" when its tree differs), else the package version; and the time."""
    import subprocess
    from importlib.metadata import PackageNotFoundError, version

    when = (now or datetime.datetime.now(datetime.timezone.utc)).strftime("%Y-%m-%d %H:%M UTC")
    try:
        git = ["git", "-C", str(where)]
        commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=30,
                                check=True).stdout.strip()
        dirty = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, timeout=30, check=True).stdout.strip()
        source = f"commit {commit[:12]}" + (" + local changes" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        try:
            source = f"autoparser {version('autoparser')}"
        except PackageNotFoundError:
            source = "autoparser (version unknown)"
    return f"made from {source} on {when}"


@dataclass(frozen=True)
class CppDivergences:
    """What the last `autoparser conformance --cpp` run found (its cpp-divergences.json), per template."""

    driver: str
    by_template: Mapping[str, tuple[int, int]]  # template -> (known, new)

    @classmethod
    def read(cls, path: Path) -> CppDivergences | None:
        """None when there is no such file (no conformance run yet) or it is not one of ours."""
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            items = raw["items"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        counts: dict[str, list[int]] = {}
        for item in items:
            c = counts.setdefault(str(item["case"]).split("/", 1)[0], [0, 0])
            c[0 if item.get("known") else 1] += 1
        return cls(str(raw.get("driver", "")), {k: (v[0], v[1]) for k, v in sorted(counts.items())})

    def markdown(self, names: Iterable[str]) -> list[str]:
        shown = [(n, self.by_template[n]) for n in names if n in self.by_template]
        out = ["## llama.cpp divergences", "",
               f"From `autoparser conformance --cpp {_md(self.driver)}` (reports/conformance/cpp-divergences.md has "
               f"every field): {len(shown)} templates differ.", "", "| template | known | new |", "|---|---|---|"]
        return out + [f"| {_md(n)} | {k} | {'**' + str(w) + '**' if w else 0} |" for n, (k, w) in shown] + [""]

    def html(self, names: Iterable[str]) -> str:
        shown = [(n, self.by_template[n]) for n in names if n in self.by_template]
        body = "".join(f"<tr><td>{html_text(n)}</td><td class=\"num\">{k}</td><td class=\"num\">{w}</td></tr>"
                       for n, (k, w) in shown)
        return (f'<h2 id="cpp-divergences">llama.cpp divergences</h2><p><small>From <code>autoparser conformance '
                f'--cpp {html_text(self.driver)}</code>: {len(shown)} templates differ (known: in '
                f'tests/data/ratchet/cpp_oracle.json with a reason).</small></p><table><thead><tr><th>Template</th>'
                f'<th>known</th><th>new</th></tr></thead><tbody>{body}</tbody></table>')


# The cross-engine matrix's summary, where `autoparser matrix` writes it beside this report (its default folder).
MATRIX_SUMMARY = Path("matrix") / "summary.md"


def write_report(rows: Sequence[TemplateRow], out_dir: Path | str, *, stamp: str = "",
                 divergences: CppDivergences | None = None) -> tuple[Path, Path]:
    """report.html and report.md in out_dir (created), each written atomically; `stamp`: `made_from(...)`;
    `divergences`: a section with the last live-oracle run's counts for these templates; the cross-engine
    matrix's summary and a link to its page, where `autoparser matrix` wrote them in out_dir/matrix/."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    html_path, md_path = out / "report.html", out / "report.md"
    names = [r.name for r in rows]
    html = render_html(rows, made_from=stamp)
    md = render_markdown(rows, made_from=stamp)
    if divergences is not None:
        html = html.replace("<script>", divergences.html(names) + "\n<script>", 1)
        md += "\n" + "\n".join(divergences.markdown(names))
    matrix = out / MATRIX_SUMMARY
    if matrix.is_file():  # `autoparser matrix` wrote its page beside this report (reports/matrix/)
        summary = matrix.read_text(encoding="utf-8")
        html = html.replace("<script>", '<h2 id="matrix">Cross-engine matrix</h2><p><small>What each engine reads of '
                            'these templates\' outputs: <a href="matrix/matrix.html">matrix/matrix.html</a>.</small>'
                            f"</p><pre>{html_text(summary)}</pre>\n<script>", 1)
        md += f"\n## Cross-engine matrix\n\nWhat each engine reads (matrix/matrix.html):\n\n{summary}"
    atomic_write_bytes(html_path, html.encode("utf-8"))
    atomic_write_bytes(md_path, md.encode("utf-8"))
    return html_path, md_path
