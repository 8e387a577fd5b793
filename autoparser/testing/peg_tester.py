"""The contributor test API: `peg_tester(template).test(output).tools([...]).expect(message)`.

A port of llama.cpp's `peg_tester` / `test_peg_parser` (tests/test-chat.cpp). Every `.expect()` runs, like the
C++ harness:

1. the streamed parse, prefix by prefix, folding `compute_deltas` into an accumulator that must equal each
   partial parse (so deltas are consistent and nothing shrinks or changes retroactively); and
   `ChatParams.stream()` fed byte by byte, which must send the same deltas;
2. the whole parse (unless the case is partial) and the folded stream, both equal to the expected message
   with the C++ comparison rules (content and reasoning stripped, argument JSON re-serialised, ids equal);
   the whole parse's repairs equal to `expect_diagnostics` (none by default; `.strict()` parses as llama.cpp);
3. a response format must come with an eager grammar;
4. the grammar, if any, compiled by llama.cpp's own engine and fed the constrained part of the output, with
   lazy triggers located as the C++ harness locates them;
5. the reconstruction of prompt + output from the expected message, when asked.

A failure raises `PegTestFailure` whose message shows the fields that differ, one per line.
"""

from __future__ import annotations

import json
import os
import re
import string
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from autoparser.chat.compare import as_message, message_differences
from autoparser.chat.spec import TriggerType
from autoparser.chat.stream import apply_deltas, compute_deltas
from autoparser.errors import ParseError, UnknownKeyError, check_keys
from autoparser.params import ChatParams, generate
from autoparser.testing.streaming import stream_mismatch
from autoparser.types import ChatMessage


class PegTestFailure(AssertionError):
    """A peg_tester expectation did not hold; the message is a readable field-by-field report."""


@dataclass(frozen=True)
class TriggerSearch:
    position: int | None
    via: str


def find_trigger(params: ChatParams, full: str, expects_calls: bool) -> TriggerSearch:
    """Where a lazy grammar would start constraining, located as the C++ harness does."""
    budget = params.grammar_lazy and bool(params.thinking_end_tags) and all(
        t.type == TriggerType.WORD for t in params.grammar_triggers)
    earliest: int | None = None
    if budget:
        start = params.thinking_start_tag
        in_thinking = False
        i = 0
        while i < len(full):
            if not in_thinking and start and full.startswith(start, i):
                in_thinking = True
                i += len(start)
                continue
            if in_thinking:
                for end in params.thinking_end_tags:
                    if full.startswith(end, i):
                        in_thinking = False
                        i += len(end) - 1
                        break
                i += 1
                continue
            if any(full.startswith(t.value, i) for t in params.grammar_triggers):
                earliest = i
                break
            i += 1
        if earliest is not None or not expects_calls:
            return TriggerSearch(earliest, "reasoning-budget")
    for t in params.grammar_triggers:
        pos: int | None = None
        if t.type == TriggerType.WORD:
            k = full.find(t.value)
            pos = k if k >= 0 else None
        elif t.type == TriggerType.PATTERN:
            m = re.search(t.value, full)
            if m:
                pos = m.start(m.re.groups) if m.re.groups else m.start()
        elif t.type == TriggerType.PATTERN_FULL:
            rx = re.compile(t.value)
            for stop in range(len(params.generation_prompt), len(full) + 1):
                m = rx.fullmatch(full[:stop])
                if m:
                    pos = next((m.start(g) for g in range(1, (m.re.groups or 0) + 1) if m.group(g)), m.start())
                    break
        if pos is not None and (earliest is None or pos < earliest):
            earliest = pos
    return TriggerSearch(earliest, "legacy")


@lru_cache(maxsize=32)
def _oracle_grammar(grammar: str) -> Any:
    from autoparser.testing.gbnf_oracle import LlamaGrammar

    return LlamaGrammar(grammar)


@dataclass(frozen=True)
class _Options:
    """How a case is parsed and what `expect` checks besides the message: the setters of the same names."""

    is_partial: bool = False
    expect_reconstruction: bool = False
    grammar_check: bool = True
    strict: bool = False
    diagnostics: tuple[str, ...] = ()  # expect_diagnostics


@dataclass
class PegTestCase:
    """One output under test. The setters change the case in place and return it, so they chain
    (`.test(output).tools(...).strict().expect(...)`) or stand as statements before `.expect()`."""

    tester: PegTester
    input: str
    request: dict[str, Any] = field(default_factory=dict)
    # (the setters' names are the C++ harness's, so the values they set live apart, under the same names)
    _options: _Options = field(default_factory=_Options, init=False)

    # --- setters (C++ names) ----------------------------------------------------------------------------------

    def _set(self, key: str, value: Any) -> PegTestCase:
        self.request[key] = value
        return self

    def tools(self, tools: Sequence[Mapping[str, Any]] | None) -> PegTestCase:
        return self._set("tools", list(tools or []))

    def reasoning_format(self, value: str) -> PegTestCase:
        return self._set("reasoning_format", value)

    def enable_thinking(self, value: bool = True) -> PegTestCase:
        return self._set("enable_thinking", value)

    def parallel_tool_calls(self, value: bool = True) -> PegTestCase:
        return self._set("parallel_tool_calls", value)

    def add_generation_prompt(self, value: bool = True) -> PegTestCase:
        return self._set("add_generation_prompt", value)

    def continue_final_message(self, value: int | str) -> PegTestCase:
        return self._set("continue_final_message", value)

    def json_schema(self, value: str | Mapping[str, Any]) -> PegTestCase:
        return self._set("json_schema", value)

    def tool_choice(self, value: int | str) -> PegTestCase:
        return self._set("tool_choice", value)

    def messages(self, value: Sequence[Mapping[str, Any]]) -> PegTestCase:
        return self._set("messages", list(value))

    def chat_template_kwargs(self, value: Mapping[str, Any]) -> PegTestCase:
        return self._set("chat_template_kwargs", dict(value))

    def now(self, value: str) -> PegTestCase:
        return self._set("now", value)

    def _option(self, **changes: Any) -> PegTestCase:
        self._options = replace(self._options, **changes)
        return self

    def is_partial(self, value: bool = True) -> PegTestCase:
        return self._option(is_partial=value)

    def expect_reconstruction(self, value: bool = True) -> PegTestCase:
        return self._option(expect_reconstruction=value)

    def grammar_check(self, value: bool = True) -> PegTestCase:
        """Whether `expect` checks the grammar with llama.cpp's engine (on by default; off for an output only an
        unconstrained model writes). Without the engine installed the check is skipped with a warning, or
        fails when AUTOPARSER_REQUIRE_ORACLE=1."""
        return self._option(grammar_check=value)

    def strict(self, value: bool = True) -> PegTestCase:
        """Parse as llama.cpp does (`parse(strict=True)`): no repairs, a malformed output fails."""
        return self._option(strict=value)

    def expect_diagnostics(self, kinds: Sequence[str]) -> PegTestCase:
        """The repairs the default parse must report, by kind and in order (`expect` then also checks them);
        without this, any repair fails `expect`: an output that parses only thanks to recovery shows."""
        return self._option(diagnostics=tuple(kinds))

    # --- expectations -------------------------------------------------------------------------------------------

    def expect_content(self, content: str) -> ChatMessage:
        __tracebackhide__ = True
        return self.expect(ChatMessage(content=content))

    def expect_reasoning(self, reasoning: str, content: str = "") -> ChatMessage:
        __tracebackhide__ = True
        return self.expect(ChatMessage(content=content, reasoning_content=reasoning))

    def expect_tool_calls(self, calls: Sequence[Mapping[str, Any]], content: str = "") -> ChatMessage:
        __tracebackhide__ = True
        return self.expect({"content": content, "tool_calls": list(calls)})

    def expect(self, message: ChatMessage | Mapping[str, Any]) -> ChatMessage:
        """Run every check of the C++ harness against `message`; return the whole parse. A key `message` does
        not know (a misspelt field can never fail) is refused with UnknownKeyError, a ValueError."""
        __tracebackhide__ = True  # pytest shows the test's line and the report, not this library's frames
        expected = as_message(_known_keys(message))
        options = self._options
        request = dict(self.request)
        request.setdefault("messages", [{"role": "user", "content": "Hey there!"}])
        request.setdefault("now", self.tester.now)
        params = generate(self.tester.source, request)
        problems: list[str] = []
        stream_msg = self._check_stream(params, problems)
        whole = stream_msg
        if not options.is_partial:
            try:
                whole = params.parse(self.input, is_partial=False, strict=options.strict)
            except ParseError as e:  # (strict: llama.cpp's rejection, where and what it expected, in the report)
                whole = None
                problems.append(f"whole parse (strict): {e}")
            if whole is not None:
                problems += [f"whole parse: {d}" for d in message_differences(expected, whole)]
                kinds = tuple(d.kind for d in whole.diagnostics)
                if kinds != options.diagnostics:
                    got = "; ".join(d.message for d in whole.diagnostics) or "none"
                    problems.append(f"repairs: expected {list(options.diagnostics) or 'none'}, got {list(kinds)}: "
                                    f"{got}")
        if stream_msg is not None:
            problems += [f"streamed (deltas folded): {d}" for d in message_differences(expected, stream_msg)]
        if request.get("json_schema"):
            if not params.grammar:
                problems.append("grammar: json_schema is set but no grammar was produced")
            elif params.grammar_lazy:
                problems.append("grammar: json_schema is set but the grammar is lazy")
        if params.grammar and options.grammar_check and _oracle_or_skip(problems):
            self._check_grammar(params, expected, problems)
        if options.expect_reconstruction and not options.is_partial and whole is not None:
            self._check_reconstruction(params, expected, whole, request, problems)
        if problems:
            raise PegTestFailure(self._report(problems, params))
        assert whole is not None
        return whole

    # --- the checks ---------------------------------------------------------------------------------------------

    def _check_stream(self, params: ChatParams, problems: list[str]) -> ChatMessage | None:
        options = self._options
        acc = prev = ChatMessage()
        text = self.input
        for i in range(1, len(text) + 1):
            partial = i < len(text) or options.is_partial
            try:
                cur = params.parse(text[:i], is_partial=partial, strict=options.strict)
                acc = apply_deltas(acc, compute_deltas(prev, cur))
            except Exception as e:
                problems.append(f"streaming: prefix {text[:i]!r} raised {type(e).__name__}: {e}")
                return None
            diffs = message_differences(cur, acc)
            if diffs:
                problems.append(f"streaming: after prefix {text[:i]!r} the folded deltas differ: {diffs[0]}")
                return None
            prev = cur
        # The incremental StreamParser must send the same deltas as those whole re-parses, byte by byte (cuts
        # inside UTF-8 sequences included).
        n = len(text.encode("utf-8", "surrogateescape"))
        mismatch = stream_mismatch(params, text, range(1, n, 1 if n <= 2000 else 7), options.is_partial, options.strict)
        if mismatch:
            problems.append(f"ChatParams.stream(): {mismatch}")
        return acc

    def _check_grammar(self, params: ChatParams, expected: ChatMessage, problems: list[str]) -> None:
        from autoparser.errors import GrammarError

        try:
            grammar = _oracle_grammar(params.grammar)
        except GrammarError as e:
            problems.append(f"grammar: llama.cpp cannot compile it: {e}")
            return
        options = self._options
        if options.diagnostics:
            return  # an output read only thanks to repairs is one the grammar exists to prevent
        full = params.generation_prompt + self.input
        found = find_trigger(params, full, bool(expected.tool_calls))
        if params.grammar_lazy and expected.tool_calls and not options.is_partial and found.position is None:
            problems.append("grammar: trigger did not fire, but tool calls are expected (lazy grammar); triggers: "
                            + ", ".join(repr(t.value) for t in params.grammar_triggers))
            return
        if found.position is not None:
            constrained = full[max(found.position, len(params.generation_prompt)):]
        elif not params.grammar_lazy:
            constrained = full
        else:
            return
        if options.is_partial:
            return
        if not grammar.accepts(constrained):
            # said as the command line says a parser's rejection (ParseError): where in the output, what would do
            candidates = sorted(set(string.printable) | {c for c in params.grammar if c.isprintable()})
            at, taken = grammar.stop(constrained, candidates)
            how = "expects more input" if at == len(constrained) else "rejects it"
            start = len(self.input) - len(constrained)
            where = f" (the lazy grammar from {start} on)" if start else ""
            rejection = ParseError(f"the constrained output{where} is not accepted ({how})", text=self.input,
                                   position=start + at, expected=_characters(taken, candidates))
            problems.append(f"grammar: {rejection}")

    def _check_reconstruction(self, params: ChatParams, expected: ChatMessage, parsed: ChatMessage,
                              request: dict[str, Any], problems: list[str]) -> None:
        calls = [replace(c, arguments=parsed.tool_calls[i].arguments) if i < len(parsed.tool_calls) else c
                 for i, c in enumerate(expected.tool_calls)]
        msg = replace(expected, tool_calls=tuple(calls))
        entry: dict[str, Any] = {"role": msg.role, "content": msg.content}
        if msg.reasoning_content:
            entry["reasoning_content"] = msg.reasoning_content
        if msg.tool_calls:
            entry["tool_calls"] = [{"type": "function", "id": c.id, "function": {"name": c.name,
                                                                                   "arguments": c.arguments}}
                                   for c in msg.tool_calls]
        rec_request = dict(request, messages=[*request["messages"], entry], add_generation_prompt=False)
        rebuilt = generate(self.tester.source, rec_request).prompt
        want = params.prompt + self.input
        if not rebuilt.startswith(want):
            k = next((i for i, (a, b) in enumerate(zip(want, rebuilt)) if a != b), min(len(want), len(rebuilt)))
            problems.append(f"reconstruction: differs at {k}: expected …{want[max(0, k - 40):k + 40]!r}, "
                            f"rebuilt …{rebuilt[max(0, k - 40):k + 40]!r}")

    def _report(self, problems: list[str], params: ChatParams) -> str:
        lines = [f"peg_tester({self.tester.name}).test({self.input!r}) failed:"]
        lines += ["  - " + p.replace("\n", "\n    ") for p in problems]
        lines.append(f"  generation prompt: {params.generation_prompt!r}")
        return "\n".join(lines)


def _characters(taken: Sequence[str], candidates: Sequence[str]) -> str:
    """The characters a grammar takes, said briefly: `"-" or "0".."9"` (runs of three or more as ranges), or
    `any character but "\"" or "\\"` where it takes most of the candidates (a string's body)."""
    if len(taken) > len(candidates) // 2:
        kept = set(taken)
        refused = [c for c in candidates if c not in kept]
        more = " or …" if len(refused) > 8 else ""
        return "any character but " + " or ".join(json.dumps(c) for c in refused[:8]) + more
    runs: list[list[str]] = []
    for c in taken:
        if runs and ord(c) == ord(runs[-1][-1]) + 1:
            runs[-1].append(c)
        else:
            runs.append([c])
    said = [f"{json.dumps(r[0])}..{json.dumps(r[-1])}" if len(r) >= 3 else " or ".join(json.dumps(c) for c in r)
            for r in runs]
    return " or ".join(said[:8]) + (" or …" if len(said) > 8 else "")


_MESSAGE_KEYS = ("role", "content", "reasoning_content", "tool_calls")
_CALL_KEYS = ("name", "arguments", "id", "type", "function")


def _known_keys(message: ChatMessage | Mapping[str, Any]) -> ChatMessage | Mapping[str, Any]:
    """`message` when every key is one a message (or a call) has; else UnknownKeyError (a ValueError) naming the
    key."""
    if isinstance(message, ChatMessage):
        return message
    if "diagnostics" in message:
        raise UnknownKeyError("expect(): repairs are not part of the message: name their kinds with "
                              ".expect_diagnostics([...])")
    check_keys(message, _MESSAGE_KEYS, caller="expect()", where="the message")
    for i, call in enumerate(message.get("tool_calls") or []):
        check_keys(call, _CALL_KEYS, caller="expect()", where=f"tool_calls[{i}]")
        if isinstance(call.get("function"), Mapping):
            check_keys(call["function"], ("name", "arguments"), caller="expect()", where=f"tool_calls[{i}].function")
    return message


class GrammarCheckSkipped(UserWarning):
    """peg_tester could not check grammars: llama.cpp's engine is not there (neither $AUTOPARSER_LIBLLAMA nor
    llama-cpp-python 0.3.36)."""


def _oracle_or_skip(problems: list[str]) -> bool:
    """Whether llama.cpp's grammar engine can check this case's grammar. Without it the check is skipped with a
    warning (once per process), or is a problem when AUTOPARSER_REQUIRE_ORACLE=1 (as in this project's CI)."""
    from autoparser.testing.gbnf_oracle import available, unavailable_reason

    if available():
        return True
    if os.environ.get("AUTOPARSER_REQUIRE_ORACLE") == "1":
        problems.append(f"grammar: {unavailable_reason()} (AUTOPARSER_REQUIRE_ORACLE=1)")
    elif not _warned:
        _warned.append(True)
        # (the reason names the pin of autoparser's `oracle` extra: that extra's own name is no install command for
        # a package that is not published)
        warnings.warn(f"peg_tester: grammar check skipped: {unavailable_reason()} (README: Writing tests with "
                      "peg_tester)", GrammarCheckSkipped, stacklevel=3)
    return False


_warned: list[bool] = []


def resolve_template(template: str | Path) -> Path:
    """A template by path, or by corpus name (`Qwen__Qwen3-0.6B`, or a path into corpus/templates/ from a
    checkout, found in the installed corpus); AutoparserError saying what was looked for when neither."""
    from autoparser.corpus import Corpus
    from autoparser.errors import AutoparserError

    path = Path(template)
    try:
        if path.is_file():
            return path
    except OSError:  # no path at all (a name too long): a template's text given where its path goes
        raise AutoparserError("peg_tester: not a template path or corpus name; to test a template's text, pass "
                              "it as source: peg_tester(name, source=text)") from None
    name = path.name.removesuffix(".jinja")
    try:
        return Corpus.load().by_name(name).path
    except AutoparserError as e:
        raise AutoparserError(f"peg_tester: no template file {str(template)!r}, and no corpus template named "
                              f"{name!r} ({e})") from None


class PegTester:
    """Holds one template; `test(output)` starts a case."""

    def __init__(self, template: str | Path, *, source: str | None = None, now: str = "2026-01-01") -> None:
        if source is None:
            path = resolve_template(template)
            self.name, self.source = path.name, path.read_text(encoding="utf-8")
        else:
            self.name, self.source = str(template), source
        self.now = now

    def test(self, output: str) -> PegTestCase:
        """A case for `output`, with the command line's defaults: generation prompt on, reasoning_format auto."""
        return PegTestCase(self, output, {"add_generation_prompt": True, "reasoning_format": "auto"})


def peg_tester(template: str | Path, *, source: str | None = None, now: str = "2026-01-01") -> PegTester:
    return PegTester(template, source=source, now=now)
