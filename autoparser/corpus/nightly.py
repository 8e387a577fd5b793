"""The nightly job: refresh corpus/ from the hub, then say what each new or changed template *does* differently.

A refresh says which template files changed; an engine maintainer needs the behaviour: "the reasoning end
marker is now `</think>\\n\\n`, two round-trip scenarios stopped passing, the one-tool grammar changed". For every
template the refresh added or changed, this recomputes its artefacts (autoparser.corpus.artefacts: capabilities,
analysis, grammars, round trip, response_template export), compares them with the committed snapshots, and
writes one report, Markdown fit for a pull-request body plus JSON:

    report = nightly(Path("corpus"), ids, HubFetcher(), snapshots=Path("snapshots"), update=True)
    report.exit_code   # 0 nothing changed, 1 something changed, 2 nothing could be fetched

The old side of a template is its snapshot folder as it was before the run (kept in the refresh journal, so a
run killed half way and resumed compares with the same files even if it had rewritten some), or, for a
template without snapshots, the artefacts of its old text. The journal goes only after the report is written.
"""

from __future__ import annotations

import difflib
import json
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from autoparser.corpus.artefacts import (
    ANALYSIS_FILE,
    CAPS_FILE,
    GRAMMAR_REQUESTS,
    RESPONSE_TEMPLATE_FILE,
    ROUNDTRIP_FILE,
    template_artefacts,
)
from autoparser.corpus.fetcher import HubFetcher
from autoparser.corpus.manifest import atomic_write_bytes
from autoparser.corpus.refresh import (
    ChangeReport,
    CorpusUpdater,
    failed_table,
    markdown_cell,
    read_snapshot_folder,
    refresh,
    snapshot_folder,
    write_report,
)
from autoparser.corpus.workers import map_templates
from autoparser.errors import AutoparserError
from autoparser.params import format_name
from autoparser.template.sandbox import time_budget

__all__ = [
    "NIGHTLY_JSON",
    "NIGHTLY_MD",
    "FieldChange",
    "NightlyReport",
    "ScenarioChange",
    "TemplateChange",
    "add_report_section",
    "compare_artefacts",
    "nightly",
]

NIGHTLY_JSON = "nightly-report.json"
NIGHTLY_MD = "nightly-report.md"
MAX_DIFF_LINES = 60  # per grammar or template diff in the Markdown; the JSON keeps them whole
MAX_MARKDOWN = 60_000  # GitHub refuses a pull-request body over 65 536 characters


@dataclass(frozen=True)
class FieldChange:
    """One value of a JSON artefact (dotted path) or a grammar's format line, before and after."""

    path: str
    old: Any
    new: Any

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "old": self.old, "new": self.new}


@dataclass(frozen=True)
class ScenarioChange:
    """A round-trip scenario whose record changed: its status before and after (None: not run then)."""

    scenario: str
    old: str | None
    new: str | None

    @property
    def direction(self) -> str:
        if self.old == self.new:
            return "output changed"
        if self.new == "pass":
            return "started passing"
        if self.old == "pass":
            return "stopped passing"
        return "status changed"

    def to_json(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "old": self.old, "new": self.new, "direction": self.direction}


@dataclass(frozen=True)
class Behaviour:
    """What changed between two sets of artefacts of one template."""

    analysis: tuple[FieldChange, ...] = ()  # markers and modes
    capabilities: tuple[FieldChange, ...] = ()
    handler: FieldChange | None = None
    formats: tuple[FieldChange, ...] = ()  # per grammar request: the C++ format the grammar is built for
    scenarios: tuple[ScenarioChange, ...] = ()
    grammar_diffs: tuple[tuple[str, str], ...] = ()  # (artefact file, unified diff)
    export: tuple[FieldChange, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.analysis or self.capabilities or self.handler or self.formats or self.scenarios
                    or self.grammar_diffs or self.export)


@dataclass(frozen=True)
class TemplateChange:
    """One template the refresh touched: `kind` is added | changed | removed."""

    kind: str
    name: str  # the corpus name now (the old one for a removed template)
    old_name: str | None
    origins: tuple[str, ...]
    behaviour: Behaviour = field(default_factory=Behaviour)
    template_diff: str = ""
    summary: Mapping[str, Any] = field(default_factory=dict)  # an added template: what it does
    snapshot_written: bool = False

    def to_json(self) -> dict[str, Any]:
        b = self.behaviour
        return {
            "kind": self.kind, "name": self.name, "old_name": self.old_name, "origins": list(self.origins),
            "behaviour_changed": b.changed, "summary": dict(self.summary),
            "handler": b.handler.to_json() if b.handler else None,
            "analysis": [c.to_json() for c in b.analysis],
            "capabilities": [c.to_json() for c in b.capabilities],
            "formats": [c.to_json() for c in b.formats],
            "scenarios": [c.to_json() for c in b.scenarios],
            "grammar_diffs": {name: diff for name, diff in b.grammar_diffs},
            "export": [c.to_json() for c in b.export],
            "template_diff": self.template_diff, "snapshot_written": self.snapshot_written,
        }


# --- comparing artefacts ------------------------------------------------------------------------------------

def _leaves(value: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted path -> value for every leaf of a JSON object; lists are one leaf (read whole, as a marker list)."""
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for k in sorted(value):
            out.update(_leaves(value[k], f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix or "(value)": value}


def _json_or_text(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return {"unreadable": text}


def _field_changes(old: str | None, new: str | None) -> tuple[FieldChange, ...]:
    a, b = _leaves(_json_or_text(old)), _leaves(_json_or_text(new))
    return tuple(FieldChange(p, a.get(p), b.get(p)) for p in sorted(set(a) | set(b)) if a.get(p) != b.get(p))


def _format_line(text: str | None) -> str | None:
    """The format a grammar artefact was built for (its header's first field), or its error line."""
    if not text:
        return None
    first = text.split("\n", 1)[0]
    if first.startswith("# format: "):
        return first.removeprefix("# format: ").split(";", 1)[0]
    return first.removeprefix("# ")


def _scenario_changes(old: str | None, new: str | None) -> tuple[ScenarioChange, ...]:
    def records(text: str | None) -> dict[str, Any]:
        value = _json_or_text(text)
        if not isinstance(value, list):  # an error artefact: no scenario ran
            return {}
        return {str(r.get("scenario")): r for r in value if isinstance(r, dict)}

    a, b = records(old), records(new)
    order = list(dict.fromkeys([*a, *b]))
    return tuple(ScenarioChange(s, a[s]["status"] if s in a else None, b[s]["status"] if s in b else None)
                 for s in order if a.get(s) != b.get(s))


def _unified(old: str, new: str, old_name: str, new_name: str) -> str:
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=f"a/{old_name}", tofile=f"b/{new_name}"))


def compare_artefacts(old: Mapping[str, str] | None, new: Mapping[str, str]) -> Behaviour:
    """The behaviour change between two artefact sets (file name -> text, as template_artefacts returns)."""
    before = old or {}
    grammars = list(GRAMMAR_REQUESTS)
    return Behaviour(
        analysis=_field_changes(before.get(ANALYSIS_FILE), new.get(ANALYSIS_FILE)),
        capabilities=_field_changes(before.get(CAPS_FILE), new.get(CAPS_FILE)),
        formats=tuple(FieldChange(n, _format_line(before.get(n)), _format_line(new.get(n))) for n in grammars
                      if _format_line(before.get(n)) != _format_line(new.get(n))),
        scenarios=_scenario_changes(before.get(ROUNDTRIP_FILE), new.get(ROUNDTRIP_FILE)),
        grammar_diffs=tuple((n, _unified(before.get(n, ""), new.get(n, ""), n, n)) for n in grammars
                            if before.get(n, "") != new.get(n, "")),
        export=_field_changes(before.get(RESPONSE_TEMPLATE_FILE), new.get(RESPONSE_TEMPLATE_FILE)),
    )


def _summary(arts: Mapping[str, str], handler: str) -> dict[str, Any]:
    """What a new template does, in the words of the report: handler, formats, markers, round trip."""
    analysis = _json_or_text(arts.get(ANALYSIS_FILE))
    rt = _json_or_text(arts.get(ROUNDTRIP_FILE))
    out: dict[str, Any] = {"handler": handler, "format": _format_line(arts.get("grammar-one-tool.gbnf"))}
    if isinstance(analysis, dict) and "error" not in analysis:
        reasoning, tools = analysis.get("reasoning", {}), analysis.get("tools", {}).get("format", {})
        out["reasoning"] = {k: reasoning.get(k) for k in ("mode", "start", "end")}
        out["tools"] = {k: tools.get(k) for k in ("mode", "section_start", "per_call_start", "per_call_end",
                                                 "section_end")}
    elif isinstance(analysis, dict):
        out["analysis_error"] = analysis["error"]
    if isinstance(rt, list):
        statuses = [r.get("status") for r in rt if isinstance(r, dict)]
        out["roundtrip"] = {s: statuses.count(s) for s in dict.fromkeys(statuses)}
    return out


# --- computing ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Computed:
    artefacts: Mapping[str, str]
    handler: str


def _handler(source: str) -> str:
    try:
        with time_budget(phase="choosing the format"):
            return format_name(source)
    except AutoparserError as e:
        return f"error: {type(e).__name__}: {e}"


def _compute(source: str) -> _Computed:
    """A worker's job: every artefact of one template, in one time budget (a hostile template costs that)."""
    with time_budget(phase="computing the nightly artefacts"):
        arts = template_artefacts(source)
    return _Computed(arts, _handler(source))


# --- the report -----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class NightlyReport:
    refresh: ChangeReport
    templates: tuple[TemplateChange, ...]

    @property
    def behaviour_changes(self) -> tuple[TemplateChange, ...]:
        return tuple(t for t in self.templates if t.kind == "changed" and t.behaviour.changed)

    @property
    def nothing_fetched(self) -> bool:
        """The job itself failed: no repo could be read (ChangeReport.nothing_fetched)."""
        return self.refresh.nothing_fetched

    @property
    def changed(self) -> bool:
        return bool(self.templates)

    @property
    def exit_code(self) -> int:
        """0 nothing changed, 1 templates changed (report written), 2 nothing could be fetched."""
        if self.nothing_fetched:
            return 2
        return 1 if self.changed else 0

    def worth_writing(self) -> bool:
        return self.changed or bool(self.refresh.failed)

    def summary_line(self) -> str:
        kinds = [t.kind for t in self.templates]
        r = self.refresh
        return (f"{kinds.count('changed')} changed ({len(self.behaviour_changes)} in behaviour), "
                f"{kinds.count('added')} added, {kinds.count('removed')} removed, {len(r.failed)} failed"
                f" ({r.repos_checked} repos, {r.repos_unchanged} unchanged)")

    def to_json(self) -> dict[str, Any]:
        r = self.refresh
        return {
            "generated_at": r.generated_at, "endpoint": r.endpoint, "offline": r.offline,
            "repos_checked": r.repos_checked, "repos_unchanged": r.repos_unchanged,
            "repos_unreadable": r.repos_unreadable, "exit_code": self.exit_code,
            "summary": self.summary_line(),
            "templates": [t.to_json() for t in self.templates], "failed": r.failed,
        }

    def to_markdown(self) -> str:
        r = self.refresh
        out = ["# Nightly corpus check", "",
               f"{r.generated_at}, from {r.endpoint}{' (offline, from the cache)' if r.offline else ''}: "
               f"{self.summary_line()}.", ""]
        changed = self.behaviour_changes
        if changed:
            out += ["## Behaviour changes", ""]
            for t in changed:
                out += _markdown_change(t)
        quiet = [t for t in self.templates if t.kind == "changed" and not t.behaviour.changed]
        if quiet:
            out += ["## Template text changed, behaviour unchanged", ""]
            for t in quiet:
                out += [f"### `{t.name}`", "", f"Origins: {_origins(t)}", "",
                        *_details("template diff", t.template_diff)]
        added = [t for t in self.templates if t.kind == "added"]
        if added:
            out += ["## Added templates", "", "| template | origins | handler | format | reasoning | tools |"
                    " round trip |", "|---|---|---|---|---|---|---|"]
            for t in added:
                s = t.summary
                rs, ts = s.get("reasoning", {}), s.get("tools", {})
                reasoning = f"{rs.get('mode')} {_code(rs.get('start'))} … {_code(rs.get('end'))}" if rs else "—"
                tools = f"{ts.get('mode')} {_code(ts.get('per_call_start') or ts.get('section_start'))}" \
                    if ts else markdown_cell(str(s.get("analysis_error", "—")))
                rt = ", ".join(f"{n} {k}" for k, n in (s.get("roundtrip") or {}).items()) or "—"
                out.append(f"| `{t.name}` | {_origins(t)} | {s.get('handler')} | {s.get('format')} | {reasoning} |"
                           f" {tools} | {rt} |")
            out.append("")
        removed = [t for t in self.templates if t.kind == "removed"]
        if removed:
            out += ["## Removed templates", ""] + [f"- `{t.name}` ({_origins(t)})" for t in removed] + [""]
        out += failed_table(r.failed)
        text = "\n".join(out)
        if len(text) > MAX_MARKDOWN:  # a pull-request body has a size limit; the JSON report has everything
            cut = text.rfind("\n", 0, MAX_MARKDOWN - 200)
            text = text[:cut] + f"\n\n… report cut at {MAX_MARKDOWN} characters; {NIGHTLY_JSON} has all of it.\n"
        return text

    def write(self, out_dir: Path) -> tuple[Path, Path]:
        return write_report(out_dir, (NIGHTLY_JSON, self.to_json()), (NIGHTLY_MD, self.to_markdown()))


def add_report_section(report_dir: Path, markdown: str) -> bool:
    """Add a job's section (`markdown`, beginning with its `## ` heading) to the nightly report in `report_dir`,
    replacing that section where a run before put it; False when there is no report (the nightly wrote none:
    nothing changed). The upstream watch and the cross-engine matrix add theirs after the nightly job."""
    path = report_dir / NIGHTLY_MD
    if not path.is_file():
        return False
    text = path.read_text(encoding="utf-8")
    heading = markdown.split("\n", 1)[0] + "\n"
    start = text.find("\n" + heading)
    if start >= 0:
        end = text.find("\n## ", start + 1)
        text = text[:start + 1] + (text[end + 1:] if end >= 0 else "")
    path.write_text(text.rstrip("\n") + "\n\n" + markdown.rstrip("\n") + "\n", encoding="utf-8")
    return True


def _code(value: Any) -> str:
    """A value as inline code: JSON, so whitespace in a marker shows (`"</think>\\n\\n"`)."""
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) or value == "" or value != \
        value.strip() or "\n" in value else value
    text = text.replace("|", "\\|")
    # a backtick in the value: a longer fence, padded (CommonMark code spans)
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def _origins(t: TemplateChange) -> str:
    return ", ".join(f"`{o}`" for o in t.origins)


def _trim(diff: str) -> tuple[str, int]:
    lines = diff.splitlines()
    return "\n".join(lines[:MAX_DIFF_LINES]), max(0, len(lines) - MAX_DIFF_LINES)


def _details(title: str, diff: str) -> list[str]:
    if not diff:
        return []
    body, more = _trim(diff)
    fence = "~~~~" if "~~~" in body else "~~~"
    tail = [f"… {more} more lines in {NIGHTLY_JSON}", ""] if more else []
    return [f"<details><summary>{title}</summary>", "", f"{fence}diff", body, fence, "", *tail, "</details>", ""]


def _markdown_change(t: TemplateChange) -> list[str]:
    b = t.behaviour
    renamed = f" (was `{t.old_name}`)" if t.old_name and t.old_name != t.name else ""
    out = [f"### `{t.name}`{renamed}", "", f"Origins: {_origins(t)}", ""]
    rows = [("handler", b.handler)] if b.handler else []
    rows += [(f"`{c.path}`", c) for c in b.analysis]
    rows += [(f"capability `{c.path}`", c) for c in b.capabilities]
    rows += [(f"format of `{c.path}`", c) for c in b.formats]
    rows += [(f"export `{c.path}`", c) for c in b.export]
    if rows:
        out += ["| what | before | after |", "|---|---|---|"]
        out += [f"| {what} | {_code(c.old)} | {_code(c.new)} |" for what, c in rows]
        out.append("")
    by_dir: dict[str, list[ScenarioChange]] = {}
    for s in b.scenarios:
        by_dir.setdefault(s.direction, []).append(s)
    for direction in ("stopped passing", "started passing", "status changed", "output changed"):
        if direction in by_dir:
            items = ", ".join(f"`{s.scenario}` ({s.old} → {s.new})" if s.old != s.new else f"`{s.scenario}`"
                              for s in by_dir[direction])
            out.append(f"- Round trip, {len(by_dir[direction])} {direction}: {items}")
    if b.scenarios:
        out.append("")
    # one block per distinct change: a new generation prompt alters every grammar's header the same way
    same: dict[str, list[str]] = {}
    for name, diff in b.grammar_diffs:
        same.setdefault(diff.split("\n", 2)[-1], []).append(name)
    for body, names in same.items():
        shown = "\n".join((f"--- a/{names[0]}", f"+++ b/{names[0]}", body))
        out += _details(f"{', '.join(names)} (diff)", shown)
    out += _details("template diff", t.template_diff)
    return out


# --- the job ------------------------------------------------------------------------------------------------

def _write_snapshot(snapshots: Path, name: str, arts: Mapping[str, str]) -> None:
    """snapshots/<key>/ holds exactly these artefacts, each file written whole (the bytes the suite reads)."""
    folder = snapshot_folder(snapshots, name)
    for file, text in arts.items():
        atomic_write_bytes(folder / file, text.encode("utf-8", "surrogateescape"))
    for stale in folder.iterdir():
        if stale.is_file() and stale.name not in arts:
            stale.unlink()


def _drop_snapshot(snapshots: Path, name: str) -> None:
    shutil.rmtree(snapshot_folder(snapshots, name), ignore_errors=True)


def _old_side(record: Mapping[str, Any], snapshots: Path | None) -> tuple[Mapping[str, str] | None, str | None]:
    """(old artefacts, old handler) of a journal record: the snapshot files kept in the journal, else the
    current folder, else computed from the old text."""
    text = record.get("text")
    handler = _handler(text) if isinstance(text, str) else None
    kept = record.get("snapshot")
    if isinstance(kept, dict):
        return kept, handler
    name = record.get("name")
    if snapshots is not None and isinstance(name, str) and "snapshot" not in record:
        current = read_snapshot_folder(snapshots, name)
        if current is not None:
            return current, handler
    if isinstance(text, str):
        return _compute(text).artefacts, handler
    return None, handler


def behaviour_of(refresh_report: ChangeReport, updater: CorpusUpdater, snapshots: Path | None, *,
                 update: bool = False, jobs: int = 1,
                 progress: Callable[[int, int], None] | None = None) -> tuple[TemplateChange, ...]:
    """Per template the refresh touched: recompute, compare with the old side, and (update) write snapshots."""
    by_name = {e.name: e for e in updater.manifest.templates}
    groups: dict[tuple[str, str | None, str], list[Mapping[str, Any]]] = {}
    for kind, records in (("changed", refresh_report.changed), ("added", refresh_report.added),
                          ("removed", refresh_report.removed)):
        for rec in records:
            name = str(rec.get("name") or rec.get("old_name"))
            old_name = rec.get("old_name")
            groups.setdefault((kind, str(old_name) if old_name else None, name), []).append(rec)
    keys = sorted(groups, key=lambda k: ({"changed": 0, "added": 1, "removed": 2}[k[0]], k[2]))
    # each template now in the corpus that the run touched, computed once however many origins it has
    live = list(dict.fromkeys(k[2] for k in keys if k[0] != "removed" and k[2] in by_name))
    sources = [(updater.root / by_name[n].file).read_bytes().decode("utf-8", "surrogateescape") for n in live]
    computed = dict(zip(live, map_templates(_compute, sources, jobs=jobs, progress=progress), strict=True))
    out: list[TemplateChange] = []
    for key in keys:
        kind, old_name, name = key
        recs = groups[key]
        origins = tuple(sorted({str(r["origin"]) for r in recs}))
        journal = updater.journal.get(origins[0], {})
        if kind == "removed":
            out.append(TemplateChange(kind, name, old_name, origins))
            continue
        now = computed.get(name)
        if now is None:  # the manifest no longer names it (a later repo of the run replaced it)
            continue
        if kind == "added":
            out.append(TemplateChange(kind, name, None, origins, summary=_summary(now.artefacts, now.handler)))
            continue
        old_arts, old_handler = _old_side(journal, snapshots)
        behaviour = compare_artefacts(old_arts, now.artefacts)
        if old_handler is not None and old_handler != now.handler:
            behaviour = replace(behaviour, handler=FieldChange("handler", old_handler, now.handler))
        out.append(TemplateChange(kind, name, old_name, origins, behaviour, template_diff=str(recs[0]["diff"])))
    if update and snapshots is not None:
        out = _update_snapshots(out, computed, live, snapshots, set(by_name))
    return tuple(out)


def _update_snapshots(changes: list[TemplateChange], computed: Mapping[str, _Computed], live: Iterable[str],
                      snapshots: Path, named: set[str]) -> list[TemplateChange]:
    """Write the new snapshots of the added and changed templates only; drop the folders of names gone."""
    written = set()
    for name in live:
        _write_snapshot(snapshots, name, computed[name].artefacts)
        written.add(name)
    for t in changes:
        for gone in (t.old_name, t.name if t.kind == "removed" else None):
            if gone and gone not in named:
                _drop_snapshot(snapshots, gone)
    return [TemplateChange(t.kind, t.name, t.old_name, t.origins, t.behaviour, t.template_diff, t.summary,
                           snapshot_written=t.name in written) for t in changes]


def nightly(corpus: Path, repo_ids: Sequence[str], fetcher: HubFetcher, *, snapshots: Path | None,
            report_dir: Path | None = None, update: bool = False, discover: int = 0, jobs: int = 1,
            progress: bool | None = None) -> NightlyReport:
    """Refresh `corpus`, then compare the behaviour of every added or changed template with `snapshots`. `jobs`
    is both the number of repos fetched at once (threads) and of worker processes computing artefacts."""
    result: list[NightlyReport] = []

    def then(report: ChangeReport, updater: CorpusUpdater) -> None:
        from tqdm import tqdm

        if report.nothing_fetched:  # a failed run: the report only (a pending journal waits for a good run)
            night = NightlyReport(report, ())
            if report_dir is not None:
                night.write(report_dir)
            result.append(night)
            return
        touched = len(report.added) + len(report.changed)
        with tqdm(total=touched, unit="template", desc="nightly artefacts",
                  disable=None if progress is None else not progress) as bar:
            changes = behaviour_of(report, updater, snapshots, update=update, jobs=jobs,
                                   progress=lambda done, _n: bar.update(done - bar.n))
        night = NightlyReport(report, changes)
        if report_dir is not None and night.worth_writing():
            night.write(report_dir)
        result.append(night)

    refresh(corpus, repo_ids, fetcher, None, discover=discover, progress=progress, snapshots=snapshots, then=then,
            jobs=jobs)
    return result[0]

