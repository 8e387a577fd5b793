"""Readable per-template artefacts for the snapshot suite (snapshots/<key>/<file>): caps, analysis, grammars.

`template_artefacts(source)` maps an artefact file name to its text. Everything is derived from the template
source alone, with fixed requests and a fixed date, so the text is deterministic: JSON with sorted keys, no
timestamps, no paths. A stage that fails yields an artefact naming the error class and message instead of
raising, so a snapshot records the failure and a change in it shows up as a diff.

    arts = template_artefacts(Path("corpus/templates/Qwen__Qwen3-8B.jinja").read_text())
    print(arts["grammar-one-tool.gbnf"])
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from autoparser.corpus.roundtrip import NOW_TEXT, QUESTION_WEATHER, SEARCH_TOOL, WEATHER_TOOL, run_roundtrip
from autoparser.export import ExportError, response_template
from autoparser.params import cached_caps, generate, strict_analysis

__all__ = [
    "ANALYSIS_FILE",
    "CAPS_FILE",
    "GRAMMAR_REQUESTS",
    "RESPONSE_TEMPLATE_FILE",
    "ROUNDTRIP_FILE",
    "artefact_names",
    "grammar_body",
    "snapshot_key",
    "template_artefacts",
]

CAPS_FILE = "capabilities.json"
ANALYSIS_FILE = "analysis.json"
ROUNDTRIP_FILE = "roundtrip.json"
RESPONSE_TEMPLATE_FILE = "response_template.json"


def _request(tools: tuple[Mapping[str, Any], ...] = (), **extra: Any) -> Mapping[str, Any]:
    return {"messages": [QUESTION_WEATHER], "tools": list(tools), "reasoning_format": "auto", "now": NOW_TEXT,
            **extra}


# Fixed requests, one grammar file each (question and tools of the round-trip scenarios and the C++ goldens).
# The thinking pair forces a tool call (tool_choice=required): the grammar is then not lazy and covers the whole
# output, reasoning included, so the pair shows what enable_thinking changes; one-tool is the plain lazy case.
GRAMMAR_REQUESTS: Mapping[str, Mapping[str, Any]] = {
    "grammar-no-tools.gbnf": _request(),
    "grammar-one-tool.gbnf": _request((WEATHER_TOOL,)),
    "grammar-parallel-tools.gbnf": _request((WEATHER_TOOL, SEARCH_TOOL), parallel_tool_calls=True),
    "grammar-thinking-on.gbnf": _request((WEATHER_TOOL,), tool_choice="required", enable_thinking=True),
    "grammar-thinking-off.gbnf": _request((WEATHER_TOOL,), tool_choice="required", enable_thinking=False),
}

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


class _Named(Protocol):
    @property
    def name(self) -> str: ...


def artefact_names() -> tuple[str, ...]:
    """The artefact file names `template_artefacts` returns, in a fixed order."""
    return (CAPS_FILE, ANALYSIS_FILE, *GRAMMAR_REQUESTS, ROUNDTRIP_FILE, RESPONSE_TEMPLATE_FILE)


def _error_message(err: BaseException) -> str:
    # Object reprs carry memory addresses; drop them so the text is the same in every run.
    return _ADDRESS.sub("", str(err))


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True) + "\n"


def _guarded(kind: str, build: Callable[[], str]) -> str:
    """Run one artefact's stage; any exception becomes an artefact text instead (a snapshot records it)."""
    try:
        return build()
    except Exception as err:  # the snapshot must record every failure, our own errors or not
        kind_name, message = type(err).__name__, _error_message(err)
        if kind == "gbnf":
            return "".join(f"# {line}\n" for line in f"error: {kind_name}: {message}".splitlines())
        return _dumps({"error": {"type": kind_name, "message": message}})


def _caps(source: str) -> str:
    # The generator's per-source cache: generate() below reuses this result instead of probing again.
    return _dumps(cached_caps(source).to_dict())


def _analysis(source: str) -> str:
    """The record `autoparser analyze --json` prints."""
    analysis = strict_analysis(source)
    return _dumps({**analysis.to_dict(), **analysis.beyond_cpp()})


def _response_template(source: str) -> str:
    """What `autoparser export response-template` prints, or why the format cannot be expressed."""
    try:
        return _dumps(response_template(source))
    except ExportError as err:
        return _dumps({"not_expressible": str(err)})


def _grammar(source: str, request: Mapping[str, Any]) -> str:
    params = generate(source, request)
    triggers = json.dumps([t.to_dict() for t in params.grammar_triggers], ensure_ascii=False, sort_keys=True)
    # The generation prompt is what differs between the thinking on/off requests of many templates.
    header = (f"# format: {params.format.value}; lazy: {str(params.grammar_lazy).lower()}; triggers: {triggers}\n"
              f"# generation_prompt: {json.dumps(params.generation_prompt, ensure_ascii=False)}\n")
    if not params.grammar:
        return header + "# no grammar\n"
    body = params.grammar if params.grammar.endswith("\n") else params.grammar + "\n"
    return header + body


def grammar_body(artefact: str) -> str:
    """The GBNF grammar inside a grammar artefact: everything after the leading `#` header lines."""
    lines = artefact.splitlines(keepends=True)
    i = 0
    while i < len(lines) and lines[i].startswith("#"):
        i += 1
    return "".join(lines[i:])


def _roundtrip(source: str) -> str:
    records: list[dict[str, Any]] = []
    for r in run_roundtrip(source):
        record = {"scenario": r.scenario, "status": r.status, "output": r.output, "parsed": r.parsed,
                  "detail": _ADDRESS.sub("", str(r.detail))}
        # Keeps the files small: `expected` is written only where it differs from what was parsed.
        if r.expected != r.parsed:
            record["expected"] = r.expected
        records.append(record)
    return _dumps(records)


def template_artefacts(source: str) -> dict[str, str]:
    """Artefact file name -> text for one template source (see the module docstring)."""
    arts = {
        CAPS_FILE: _guarded("json", lambda: _caps(source)),
        ANALYSIS_FILE: _guarded("json", lambda: _analysis(source)),
    }
    for name, request in GRAMMAR_REQUESTS.items():
        arts[name] = _guarded("gbnf", functools.partial(_grammar, source, request))
    arts[ROUNDTRIP_FILE] = _guarded("json", lambda: _roundtrip(source))
    arts[RESPONSE_TEMPLATE_FILE] = _guarded("json", lambda: _response_template(source))
    return arts


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_MAX_KEY = 120


def snapshot_key(entry: _Named | str) -> str:
    """A stable folder name per corpus entry (or entry name): its name when that is already filesystem-safe,
    otherwise the name with unsafe characters replaced plus a short hash of the real name (so two names never
    collide)."""
    name = entry if isinstance(entry, str) else entry.name
    safe = _UNSAFE.sub("_", name).strip("._") or "template"
    if safe == name and len(safe) <= _MAX_KEY:
        return safe
    digest = hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:10]
    return f"{safe[:_MAX_KEY - 11]}-{digest}"
