"""Engines as adapters: what does this engine make of this output, for this template and request?

Every engine answers the same question behind one interface (`Engine`): given a template's cases
(autoparser.matrix.cases), which parser it picks for the template (`Reading.choice`; None where it picks
none, so that a user must configure it by hand) and, for each case, the message it reads or its error
(`Answer`). Engines that run in this process (`in_process`) are asked one template at a time, inside the
matrix's worker processes; the others (llama.cpp's driver, SGLang's parsers in their own environment) are
asked for every template at once and spread their own work. An engine that is not installed says why
(`missing`), and the matrix reports its column as such.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from autoparser.chat.compare import as_message
from autoparser.corpus.roundtrip import NOW_TEXT, generate_cached
from autoparser.errors import AutoparserError, NothingToExport
from autoparser.export import response_template, transformers_message
from autoparser.matrix.cases import TemplateCases
from autoparser.testing.cpp_oracle import run_driver
from autoparser.types import ChatMessage

__all__ = [
    "GAVE_UP",
    "Answer",
    "AutoparserEngine",
    "Engine",
    "LlamaCppEngine",
    "ProgramEngine",
    "Reading",
    "SGLangEngine",
    "StrictEngine",
    "TransformersEngine",
    "default_sglang_python",
]


@dataclass(frozen=True)
class Answer:
    """An engine's reading of one output: the message, or why it gave none."""

    message: ChatMessage | None = None
    error: str | None = None


@dataclass(frozen=True)
class Reading:
    """What one engine makes of one template: the parser it picks (None: none, the user must choose one) and
    an answer per case, in the cases' order."""

    choice: str | None
    answers: tuple[Answer, ...]


class Engine:
    """One column of the matrix."""

    name: ClassVar[str]
    """The column's key (`autoparser matrix --engines`)."""
    in_process: ClassVar[bool] = True

    def missing(self) -> str | None:
        """Why this engine cannot run here (a package or a build that is not there), None when it can."""
        return None

    def read(self, template: TemplateCases) -> Reading:
        """This engine's reading of one template's cases (an in-process engine's unit of work)."""
        raise NotImplementedError(f"{self.name} reads every template at once (read_all)")

    def read_all(self, templates: Sequence[TemplateCases], *, workers: int = 1) -> list[Reading]:
        """The readings of many templates, in order."""
        return [self.read(t) for t in templates]


class AutoparserEngine(Engine):
    """autoparser's default reading: the parser generated for the request, with recovery."""

    name = "autoparser"
    strict: ClassVar[bool] = False

    def read(self, template: TemplateCases) -> Reading:
        answers = []
        choice = None
        for case in template.cases:
            try:
                params = generate_cached(template.source, case.request)
                choice = _better_choice(choice, params.format.value)
                answers.append(Answer(params.parse(case.output, strict=self.strict)))
            except AutoparserError as e:
                answers.append(Answer(error=str(e)))
        return Reading(choice, tuple(answers))


class StrictEngine(AutoparserEngine):
    """autoparser's strict reading: llama.cpp's own rules, no recovery (an output off the format is an error)."""

    name = "autoparser-strict"
    strict = True


class TransformersEngine(Engine):
    """transformers' `parse_response` with the response_template autoparser exports for the template. (A model's
    own response_template would be a column of its own: the corpus records none today.)"""

    name = "transformers"

    def missing(self) -> str | None:
        try:
            from transformers.utils import chat_parsing  # noqa: F401
        except ImportError as e:
            return f"transformers with chat_parsing is not installed ({e})"
        return None

    def read(self, template: TemplateCases) -> Reading:
        from transformers.utils import chat_parsing

        try:
            spec = response_template(template.source)
        except NothingToExport:  # a transformers user takes the decoded text as the content
            return Reading("none needed (the whole output is content)",
                           tuple(Answer(ChatMessage(content=case.output)) for case in template.cases))
        except AutoparserError as e:
            why = f"no response_template: {e}"
            return Reading(None, tuple(Answer(error=why) for _ in template.cases))
        answers = []
        for case in template.cases:
            try:
                parsed = chat_parsing.parse_response(case.output, spec, prefix=case.prompt, tools=case.tools)
                answers.append(Answer(as_message(transformers_message(parsed))))
            except (ValueError, KeyError, TypeError) as e:  # transformers' own: a region or transform it refuses
                answers.append(Answer(error=f"transformers raised: {str(e).splitlines()[0] if str(e) else e!r}"))
        return Reading("response_template (autoparser export)", tuple(answers))


def _better_choice(choice: str | None, this: str | None) -> str | None:
    """The format a template's requests are read with: the one of its requests with tools, where a request
    without them is read as plain content."""
    return this if choice in (None, "Content-only") else choice


def _message_or_error(answer: Any) -> Answer:
    if not isinstance(answer, dict):
        return Answer(error=f"not a message: {answer!r}")
    if "error" in answer:
        return Answer(error=str(answer["error"]))
    return Answer(as_message(answer))


class ProgramEngine(Engine):
    """An engine that answers from a program of its own, JSON lines in and out (llama.cpp's driver protocol:
    autoparser.testing.cpp_oracle `run_driver`), asked for every template at once."""

    in_process = False
    program_is: ClassVar[str]
    """What the program is, in the words of `missing`."""
    made_by: ClassVar[str]
    """The command that makes it (what `missing` tells a user to run)."""

    def __init__(self, program: Path | None) -> None:
        self.program = program

    def missing(self) -> str | None:
        if self.program is None:
            return f"no {self.program_is} given (make one: {self.made_by})"
        if not os.access(self.program, os.X_OK):
            return f"no {self.program_is} at {self.program} (make one: {self.made_by})"
        return None


# The parser choice of a template llama.cpp fails on (its error is each case's answer).
GAVE_UP = "none: llama.cpp fails on the template"


class LlamaCppEngine(ProgramEngine):
    """llama.cpp's own parse, through the live oracle's driver (tools/cpp_oracle; any llama.cpp build)."""

    name = "llama.cpp"
    program_is = "llama.cpp driver"
    made_by = "python -m tools.cpp_oracle --out DIR/cpp_oracle"

    def read_all(self, templates: Sequence[TemplateCases], *, workers: int = 1) -> list[Reading]:
        assert self.program is not None
        jobs = []
        for t in templates:
            by_request: dict[str, dict[str, Any]] = {}
            for case in t.cases:
                job = by_request.setdefault(case.scenario, {"id": case.scenario, "params": dict(case.request),
                                                            "now": NOW_TEXT, "outputs": []})
                job["outputs"].append({"text": case.output, "is_partial": False})
            jobs.append({"id": t.name, "template": t.path, "analyze": False, "requests": list(by_request.values())})
        out = []
        for t, answer in zip(templates, run_driver(self.program, jobs, workers=workers)):
            requests = {r.get("id"): r for r in answer.get("requests", [])}
            seen: dict[str, int] = {}
            answers = []
            choice = None
            for case in t.cases:
                i = seen[case.scenario] = seen.get(case.scenario, -1) + 1
                r = requests.get(case.scenario)
                if r is None or "parsed" not in r:
                    why = (r or answer).get("error", "no answer")
                    answers.append(Answer(error=f"llama.cpp: {why}"))
                    continue
                choice = _better_choice(choice, r.get("format"))
                answers.append(_message_or_error(r["parsed"][i]))
            # a template llama.cpp makes no parser for at all is one it gives up on, not one left to its user
            out.append(Reading(choice or (GAVE_UP if t.cases else None), tuple(answers)))
        return out


def default_sglang_python() -> Path:
    """Where `python -m tools.sglang_env` makes SGLang's environment (its interpreter)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "autoparser" / "sglang" / "bin" / "python"


# The bridge runs in SGLang's environment, not ours: it imports nothing of autoparser.
BRIDGE = Path(__file__).resolve().parent / "sglang_bridge.py"


class SGLangEngine(ProgramEngine):
    """SGLang's own parsers (`llm-router-utils`, a faithful extraction of them), picked as SGLang picks them
    from the template text, run in their own environment (they pin their own transformers): `program` is that
    environment's interpreter, which runs `sglang_bridge.py` on a template and its cases per JSON line."""

    name = "sglang"
    program_is = "SGLang environment"
    made_by = "python -m tools.sglang_env"

    def read_all(self, templates: Sequence[TemplateCases], *, workers: int = 1) -> list[Reading]:
        assert self.program is not None
        jobs = [{"id": t.name, "template": t.source,
                 "cases": [{"prompt": c.prompt, "output": c.output, "tools": c.tools,
                            "chat_template_kwargs": _template_kwargs(c.request)} for c in t.cases]}
                for t in templates]
        # (a process imports SGLang's modules in about a second: a few dozen templates each)
        answers = run_driver([str(self.program), str(BRIDGE)], jobs, workers=workers, chunk=32)
        out = []
        for t, answer in zip(templates, answers):
            got = answer.get("answers") or [{"error": answer.get("error", "no answer")}] * len(t.cases)
            out.append(Reading(_sglang_choice(answer), tuple(_message_or_error(a.get("message", a)) for a in got)))
        return out


def _template_kwargs(request: Mapping[str, Any]) -> dict[str, Any]:
    """The request's template switches as an OpenAI client sends them to SGLang (`chat_template_kwargs`)."""
    kwargs = dict(request.get("chat_template_kwargs") or {})
    if "enable_thinking" in request:
        kwargs.setdefault("enable_thinking", request["enable_thinking"])
    return kwargs


def _sglang_choice(answer: dict[str, Any]) -> str | None:
    tool, reasoning = answer.get("tool_parser"), answer.get("reasoning_parser")
    if not tool and not reasoning:
        return None
    return " + ".join(f"{kind} {name}" for kind, name in (("tools", tool), ("reasoning", reasoning)) if name)
