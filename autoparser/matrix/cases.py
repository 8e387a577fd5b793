"""What the matrix asks every engine: one template's outputs, each with the message it means.

A template's cases are the round-trip scenarios it expresses (the intended message rendered after the prompt,
autoparser.corpus.roundtrip; kind `rendered`) and the realistic variants of those outputs (what models write
around the template's markup, autoparser.corpus.variants; their kind). A variant is made only from an output
our default parse reads as meant (a variant of a misread output would blame the engines for our mistake), as
tests/recovery/test_variants.py does. Every case says which fields an answer must give back (`checks`) and is
judged as the C++ tests judge a parse: texts without their surrounding whitespace, arguments as JSON, ids
ignored (`judge`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from autoparser.chat.compare import as_message
from autoparser.corpus import CorpusEntry
from autoparser.corpus.report import family_of
from autoparser.corpus.roundtrip import expressible_scenarios, generator_request
from autoparser.corpus.variants import Variant, kept, markers_of, variants
from autoparser.errors import AutoparserError
from autoparser.params.generator import cached_analysis
from autoparser.template.sandbox import time_budget
from autoparser.types import ChatMessage

__all__ = ["RENDERED", "Case", "TemplateCases", "judge", "template_cases"]

# The kind of a case that is the template's own rendering of the intended message (a variant's kind otherwise).
RENDERED = "rendered"
_ALL_FIELDS = ("reasoning_content", "content", "tool_calls")


@dataclass(frozen=True)
class Case:
    """One output of one request of one template, and what it means."""

    id: str
    """`<template>::<scenario>` for a rendered output, `<template>::<scenario>::<kind>` for a variant."""
    scenario: str
    kind: str
    output: str
    prompt: str
    """The rendered prompt the output follows (an engine that reads the prompt's open reasoning needs it)."""
    request: Mapping[str, Any]
    """The request as `autoparser.generate` and llama.cpp's driver take it (messages, tools, reasoning format)."""
    meant: Variant
    """The message the output means and the fields an answer must keep (`Variant.checks`, `Variant.tail`)."""

    @property
    def tools(self) -> list[Any] | None:
        tools = self.request.get("tools")
        return list(tools) if tools else None


@dataclass(frozen=True)
class TemplateCases:
    """A corpus template and its cases (none where the template renders no conversation we can build)."""

    name: str
    family: str
    path: str
    source: str
    cases: tuple[Case, ...]
    error: str | None = None
    """Why no case could be built, where none could (a template that does not compile)."""


def judge(case: Case, got: ChatMessage) -> list[str]:
    """What an answer lost or misread of what the case means ([] when it reads the output as meant)."""
    return kept(case.meant, got)


def template_cases(entry: CorpusEntry) -> TemplateCases:
    """Every case of one corpus template (never raises: a template we cannot render says why)."""
    source = entry.read_text()
    cases: list[Case] = []
    error = None
    try:
        with time_budget(phase=f"building the matrix cases of {entry.name}"):
            analysis = cached_analysis(source)
            for built, params in expressible_scenarios(source):
                expected = as_message(built.expected)
                request = generator_request(built.request)
                own = Variant(RENDERED, built.output, expected, _ALL_FIELDS)
                base = f"{entry.name}::{built.scenario}"
                cases.append(Case(base, built.scenario, RENDERED, built.output, params.prompt, request, own))
                if kept(own, params.parse(built.output)):
                    continue  # our own reading is wrong already: nothing to vary
                for v in variants(params, built.output, expected, markers_of(params, analysis)):
                    cases.append(Case(f"{base}::{v.kind}", built.scenario, v.kind, v.output, params.prompt, request,
                                      v))
    except AutoparserError as e:
        error = str(e)
    return TemplateCases(entry.name, family_of(entry), str(entry.path), source, tuple(cases), error)

