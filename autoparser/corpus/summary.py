"""`autoparser corpus summary`: the main job on the corpus. Every template analysed; per template, the formats of
the C++ analysis record (reasoning / content / tool-call modes and their markers) and what autoparser reads beyond
that record (README "Tool-call forms beyond llama.cpp"): the hand-written format that claims the template, the
reading of the template as transformers renders it, a call form the record has no field for (Python calls where it
says tools=NONE), a reasoning block the generation prompt opens, tools the template only describes. Then totals.

    rows = summary_rows(Corpus.load().entries, jobs=2)
    print(render_summary(rows, seconds))
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from autoparser.analysis.model import StringValues, TemplateAnalysis, ToolFormat
from autoparser.corpus import CorpusEntry
from autoparser.corpus.workers import map_templates
from autoparser.errors import AutoparserError
from autoparser.params import format_name, strict_analysis
from autoparser.peg.nodes import C_SPACE
from autoparser.template.sandbox import time_budget

__all__ = ["SummaryRow", "render_summary", "summary_row", "summary_rows"]

# What format_name() calls the parser made from the analysis (no hand-written format claims the template).
_GENERIC = "autoparser"


@dataclass(frozen=True)
class SummaryRow:
    """One template: the C++ record's modes, its markers, what autoparser reads beyond them; or why it could
    not be analysed."""

    name: str
    cpp: str = ""  # "reasoning=TAG_BASED content=PLAIN tools=TAG_WITH_JSON"
    markers: tuple[str, ...] = ()  # the reasoning markers and the tool calls' openers, as the record has them
    beyond: tuple[str, ...] = ()  # "call_form=PYTHONIC list", "handler=gpt_oss", ...: none where the record says it all
    record: Mapping[str, Any] = field(default_factory=dict)  # `autoparser analyze --json`'s, and the handler
    calls_unseen: bool = False  # the record says tools=NONE; the analysis a parser is made from reads calls
    error: str = ""


def summary_row(entry: CorpusEntry) -> SummaryRow:
    """The row of one template; a template that cannot be analysed is a row with its error (data, not a crash)."""
    try:
        with time_budget(phase=f"analysing {entry.name}"):  # one budget per template, as every corpus job
            source = entry.read_text()
            analysis = strict_analysis(source)
            handler = format_name(source)
    except AutoparserError as e:
        # (the first line; the row names the template, where the generator's errors say `<template>`)
        message = (str(e).strip().splitlines() or [type(e).__name__])[0]
        return SummaryRow(entry.name, error=message.removeprefix("<template>: "))
    d = analysis.to_dict()
    cpp = f"reasoning={d['reasoning']['mode']} content={d['content']['mode']} tools={d['tools']['format']['mode']}"
    fmt = d["tools"]["format"]
    markers = tuple(repr(m) for m in (d["reasoning"]["start"], d["reasoning"]["end"], fmt["section_start"],
                                      fmt["per_call_start"]) if m)
    record = {**d, **analysis.beyond_cpp(), "handler": handler}
    effective = analysis.effective
    unseen = analysis.tools.format.mode is ToolFormat.NONE and (
        effective.call_form is not None or effective.tools.format.mode is not ToolFormat.NONE)
    return SummaryRow(entry.name, cpp, markers, _beyond(analysis, handler), record, unseen)


def _beyond(a: TemplateAnalysis, handler: str) -> tuple[str, ...]:
    """What the parser autoparser makes reads that the C++ record does not say, each as `key=value` under the
    names `analyze --json` gives it (`beyond_cpp`), the hand-written format first (it, not the record, parses)."""
    out = [] if handler == _GENERIC else [f"handler={handler}"]
    reading = a.transformers_reading
    if reading is not None:
        modes = (f"reasoning={reading.reasoning.mode.value}", f"content={reading.content.mode.value}",
                 f"tools={reading.tools.format.mode.value}")
        out.append(f"transformers_reading({' '.join(modes)})")
    form = a.effective.call_form
    if form is not None:
        words = [form.syntax.value, "list" if form.list_wrapped else "one per line"]
        if form.strings is not StringValues.LITERAL:
            words.append(f"{form.strings.value.lower()} strings")
        if form.section_start.strip(C_SPACE):
            words.append(f"in {form.section_start.strip(C_SPACE)!r}")
        out.append(f"call_form={' '.join(words)}")
    if a.effective.string_arguments:
        out.append("string_arguments")
    if a.tool_calls_described_only:
        out.append("tool_calls=described_only")
    if a.effective.call_separator is not None:
        out.append(f"call_separator={a.effective.call_separator!r}")
    nested = a.effective.nested_call
    if nested is not None:
        out.append(f"nested_call={nested.member}.{{{nested.name_key},{nested.args_key}}}")
    if a.effective.section_start_in_prompt:
        out.append("section_start_in_prompt")
    for key, block in (("prompt_reasoning", a.effective.prompt_reasoning),
                       ("typed_reasoning", a.effective.typed_reasoning)):
        if block is not None:
            out.append(f"{key}={block.start.strip(C_SPACE)!r}..{block.end.strip(C_SPACE)!r}")
    return tuple(out)


def summary_rows(entries: Sequence[CorpusEntry], *, jobs: int = 1,
                 progress: Callable[[int, int], None] | None = None) -> list[SummaryRow]:
    """The rows of `entries`, in their order; jobs > 1 analyses in worker processes."""
    return map_templates(summary_row, entries, jobs=jobs, chunksize=4, progress=progress)


def render_summary(rows: Iterable[SummaryRow], seconds: float) -> str:
    """The job's text: one line per template, then the totals of the record's formats and of what is read beyond
    them, then the templates that could not be analysed."""
    rows = list(rows)
    done = [r for r in rows if not r.error]
    width = min(max((len(r.name) for r in done), default=0), 60)  # (a few names are twice as long)
    lines = [(f"{r.name:<{width}}  {r.cpp:<58} {' '.join(r.markers)}"
              + (f"  + {'; '.join(r.beyond)}" if r.beyond else "")).rstrip() for r in done]
    failed = [r for r in rows if r.error]
    lines += ["", f"{len(rows)} templates analysed in {seconds:.1f} s; {len(failed)} could not be analysed", "",
              "The C++ analysis record (reasoning / content / tool-call modes):"]
    lines += [f"{n:5d}  {key}" for key, n in Counter(r.cpp for r in done).most_common()]
    read = Counter(item.partition("=")[0].partition("(")[0] for r in done for item in r.beyond)
    lines += ["", f"What autoparser reads beyond the record ({sum(1 for r in done if r.beyond)} templates):"]
    lines += [f"{n:5d}  {key}" for key, n in read.most_common()]
    lines.append(f"{sum(r.calls_unseen for r in done):5d}  tool calls where the record says tools=NONE")
    lines += [f"  not analysed: {r.name}: {r.error}" for r in failed]
    return "\n".join(lines) + "\n"

