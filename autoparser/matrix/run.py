"""The matrix: every selected corpus template × every engine, each cell the share of the template's cases the
engine reads as meant, each miss classified.

    matrix = run_matrix(Corpus.load(), default_engines(driver=..., sglang=...), jobs=2, known=load_known(...))
    matrix.summary()            # per engine: templates read fully right / partly / not at all

A miss is one of three things (`Miss.verdict`):
- `autoparser wrong`: our default reading loses or misreads the case (the cell of every engine that misses it
  too points at it). Each is fixed or in the ratchet with its reason (`known`: round-trip cases as
  tests/data/ratchet/roundtrip.json lists them under `self:`, variants in tests/data/ratchet/matrix.json);
  one that is not is *new* and fails `autoparser matrix --check`.
- `engine wrong`: the engine loses or misreads what the template itself renders, where autoparser reads it.
- a named policy: the output is a variant, not what the template renders, and the engine reads only the
  template's own layout (`policy: layout`); or the engine picks no parser for the template, so that its users
  must name one (`policy: unconfigured`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from autoparser.corpus import Corpus, CorpusEntry
from autoparser.corpus.report import select_entries
from autoparser.corpus.workers import map_templates
from autoparser.matrix.cases import RENDERED, Case, TemplateCases, judge, template_cases
from autoparser.matrix.engines import Answer, AutoparserEngine, Engine, Reading
from autoparser.types import ChatMessage

__all__ = [
    "AUTOPARSER_WRONG",
    "ENGINE_WRONG",
    "POLICIES",
    "Cell",
    "Column",
    "Matrix",
    "Miss",
    "Row",
    "run_matrix",
]

AUTOPARSER_WRONG = "autoparser wrong"
ENGINE_WRONG = "engine wrong"
POLICIES = {
    "policy: layout": "the output is a variant of what the template renders (a layout real models write); this "
                      "engine reads only the template's own layout",
    "policy: unconfigured": "the engine picks no parser for this template: its users must name one by hand",
}


@dataclass(frozen=True)
class Miss:
    """One case an engine does not read as meant."""

    case: str
    kind: str
    verdict: str
    differences: tuple[str, ...]
    """What the engine's answer lost or misread (or the engine's error)."""
    output: str
    got: Mapping[str, Any] | None
    """The engine's message (as a record), None where it answered with an error."""
    ours: Mapping[str, Any] | None
    """autoparser's default reading of the same case."""
    reason: str | None = None
    """For `autoparser wrong`: the ratchet's reason (None: not in the ratchet, a new failure)."""


@dataclass(frozen=True)
class Cell:
    """One engine on one template."""

    choice: str | None
    rendered: tuple[int, int]
    """(read as meant, cases) among the template's own rendered outputs."""
    variants: tuple[int, int]
    """(read as meant, cases) among their realistic variants."""
    misses: tuple[Miss, ...] = ()

    @property
    def cases(self) -> int:
        return self.rendered[1] + self.variants[1]


@dataclass(frozen=True)
class Row:
    template: str
    family: str
    cells: Mapping[str, Cell]
    """Engine name -> its cell (absent for an engine that is not installed)."""
    calls: bool
    """Whether the template renders a tool call (a user of a tool-calling engine needs a tool parser)."""
    error: str | None = None


@dataclass(frozen=True)
class Column:
    engine: str
    missing: str | None
    """Why the engine did not run here (not installed), None when it ran."""


@dataclass(frozen=True)
class Matrix:
    columns: tuple[Column, ...]
    rows: tuple[Row, ...]
    made_from: str = ""

    def summary(self, *, variants: bool = False) -> dict[str, dict[str, int]]:
        """Per engine that ran: templates whose cases (the rendered outputs; with `variants` their variants too)
        it reads fully right, partly, not at all; and the cases read as meant of all."""
        out: dict[str, dict[str, int]] = {}
        for col in self.columns:
            if col.missing is not None:
                continue
            s = out[col.engine] = {"full": 0, "partly": 0, "none": 0, "right": 0, "cases": 0}
            for row in self.rows:
                cell = row.cells.get(col.engine)
                if cell is None:
                    continue
                right, n = cell.rendered
                if variants:
                    right, n = right + cell.variants[0], n + cell.variants[1]
                if n == 0:
                    continue
                s["full" if right == n else "partly" if right else "none"] += 1
                s["right"] += right
                s["cases"] += n
        return out

    def choices(self) -> dict[str, dict[str, int]]:
        """Per engine that ran, over the templates that render a tool call: the parser it picks for them reads
        every rendered output right (`right`), misreads some (`wrong`), or it picks none (`none`: its users must
        name one by hand)."""
        out: dict[str, dict[str, int]] = {}
        for col in self.columns:
            if col.missing is not None:
                continue
            s = out[col.engine] = {"templates": 0, "right": 0, "wrong": 0, "none": 0}
            for row in self.rows:
                cell = row.cells.get(col.engine)
                if cell is None or not row.calls:
                    continue
                s["templates"] += 1
                s["none" if cell.choice is None else "right" if cell.rendered[0] == cell.rendered[1] else "wrong"] += 1
        return out

    def new_failures(self) -> list[Miss]:
        """autoparser-wrong misses that no ratchet entry explains (`autoparser matrix --check` fails on them)."""
        return [m for m in self._ours() if m.reason is None]

    def _ours(self) -> list[Miss]:
        """The misses of autoparser's own (default) reading, where it ran."""
        return [m for row in self.rows if AutoparserEngine.name in row.cells
                for m in row.cells[AutoparserEngine.name].misses]

    def stale(self, known: Mapping[str, str]) -> list[str]:
        """Ratchet entries for templates of this run whose case is no longer a miss of ours."""
        ours = {m.case for m in self._ours()}
        templates = {row.template for row in self.rows if AutoparserEngine.name in row.cells}
        return sorted(k for k in known if k.split("::")[0] in templates and k not in ours)


def _record(m: ChatMessage | None) -> dict[str, Any] | None:
    return None if m is None else {k: v for k, v in m.to_dict().items() if k != "role"}


def _verdict(engine: str, case: Case, reading: Reading, ours_right: bool) -> str:
    if engine == AutoparserEngine.name or not ours_right:
        return AUTOPARSER_WRONG
    if case.kind != RENDERED:
        return "policy: layout"
    if reading.choice is None:
        return "policy: unconfigured"
    return ENGINE_WRONG


def _problems(case: Case, answer: Answer) -> list[str]:
    if answer.message is None:
        return [answer.error or "no answer"]
    return judge(case, answer.message)


def _cells(template: TemplateCases, readings: Mapping[str, Reading], known: Mapping[str, str]) -> dict[str, Cell]:
    ours = readings.get(AutoparserEngine.name)
    ours_problems = [_problems(c, a) for c, a in zip(template.cases, ours.answers)] if ours else None
    cells = {}
    for engine, reading in readings.items():
        counts = {True: [0, 0], False: [0, 0]}
        misses = []
        for i, (case, answer) in enumerate(zip(template.cases, reading.answers)):
            problems = ours_problems[i] if ours_problems is not None and engine == AutoparserEngine.name \
                else _problems(case, answer)
            tally = counts[case.kind == RENDERED]
            tally[1] += 1
            if not problems:
                tally[0] += 1
                continue
            ours_right = ours_problems is not None and not ours_problems[i]
            verdict = _verdict(engine, case, reading, ours_right)
            mine = ours.answers[i].message if ours else None
            # (the ratchet's reason goes with our own miss; another engine's miss of the case points at it)
            reason = known.get(case.id) if engine == AutoparserEngine.name else None
            misses.append(Miss(case.id, case.kind, verdict, tuple(problems), case.output, _record(answer.message),
                               _record(mine), reason))
        cells[engine] = Cell(reading.choice, (counts[True][0], counts[True][1]), (counts[False][0], counts[False][1]),
                             tuple(misses))
    return cells


def _in_process(args: tuple[CorpusEntry, tuple[Engine, ...]]) -> tuple[TemplateCases, dict[str, Reading]]:
    """One template's cases and the readings of the engines that run in this (worker) process."""
    entry, engines = args
    template = template_cases(entry)
    return template, {e.name: e.read(template) for e in engines}


def run_matrix(corpus: Corpus, engines: Sequence[Engine], *, only: Sequence[str] | None = None, jobs: int = 1,
               known: Mapping[str, str] | None = None, made_from: str = "",
               progress: Callable[[str, int, int], None] | None = None) -> Matrix:
    """Every engine over the cases of every selected template. An engine whose `missing()` says why it cannot
    run is a column that says so. `progress(stage, done, total)` while it runs."""
    columns = tuple(Column(e.name, e.missing()) for e in engines)
    running = [e for e, c in zip(engines, columns) if c.missing is None]
    local = tuple(e for e in running if e.in_process)
    entries = select_entries(corpus, only or None)
    tick: Callable[[int, int], None] | None = (lambda d, n: progress("cases", d, n)) if progress else None
    built = map_templates(_in_process, [(e, local) for e in entries], jobs=jobs, chunksize=2, progress=tick)
    templates = [t for t, _ in built]
    readings = [dict(r) for _, r in built]
    for engine in running:
        if engine.in_process:
            continue
        if progress:
            progress(engine.name, 0, len(templates))
        for r, reading in zip(readings, engine.read_all(templates, workers=jobs)):
            r[engine.name] = reading
        if progress:
            progress(engine.name, len(templates), len(templates))
    order = [e.name for e in running]
    rows = tuple(Row(t.name, t.family, _cells(t, {n: r[n] for n in order}, known or {}),
                     any(c.meant.expected.tool_calls for c in t.cases), t.error)
                 for t, r in zip(templates, readings))
    return Matrix(columns, rows, made_from)

