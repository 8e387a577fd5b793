"""Model outputs broken the way real models break them, from well-formed ones, with what must still come out.

From a well-formed output of a request (a round trip's render of an intended message) and the message it
means, each mutation makes one of the mistakes users of every engine report: the last closer missing at the
end, text after the last call, the first call's opener left out, the reasoning start written again after a
prompt that opened it. The markers come from what the request's format says (its closers, its call triggers,
its reasoning start), never from a model name. `recovered` checks a parse against what the mutation keeps.

One more kind is asked for by name only (`mutations(..., kinds=TRUNCATION_KINDS)`): the generation stopped
inside the last call's arguments (cut in the middle of the last string value the call passes, wherever the
format writes it: `{"city": "Par`, `<parameter=city>\nPar`). What it keeps is the text before the calls; the
strict parse's answer to it is llama.cpp's (tests/data/strict_mutations.jsonl).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from autoparser.chat.compare import as_message, message_differences
from autoparser.chat.spec import TriggerType
from autoparser.corpus.roundtrip import expressible_scenarios
from autoparser.errors import AutoparserError
from autoparser.params import ChatParams
from autoparser.peg.nodes import C_SPACE
from autoparser.types import ChatMessage

__all__ = ["KINDS", "TRUNCATION_KINDS", "Mutation", "mutations", "recovered", "recovery_counts"]

KINDS = ("cut_last_closer", "text_after_calls", "missing_call_opener", "repeated_reasoning_start")
TRUNCATION_KINDS = ("cut_in_last_arguments",)
"""Kinds `mutations` makes only when asked: a truncated output is no malformed one to recover the meaning of."""
TRAILING_TEXT = "\n\nDone."


@dataclass(frozen=True)
class Mutation:
    kind: str
    output: str
    expected: ChatMessage
    checks: tuple[str, ...]
    """The fields the parse of `output` must still give as `expected` ("tool_calls", "reasoning_content",
    "content")."""


def mutations(params: ChatParams, output: str, expected: ChatMessage,
              kinds: Iterable[str] = KINDS) -> Iterator[Mutation]:
    """The mutations of `kinds` that apply to this output of this request (each at most once), in the order of
    KINDS + TRUNCATION_KINDS."""
    wanted = set(kinds)
    return (m for m in _all_mutations(params, output, expected) if m.kind in wanted)


def _all_mutations(params: ChatParams, output: str, expected: ChatMessage) -> Iterator[Mutation]:
    calls = bool(expected.tool_calls)
    if calls:
        stripped = output.rstrip(C_SPACE)
        ends = sorted((c.strip(C_SPACE) for c in params.reader.plan.closers if c.strip(C_SPACE)),
                      key=len, reverse=True)
        closer = next((c for c in ends if stripped.endswith(c)), "")
        if closer:
            yield Mutation("cut_last_closer", stripped[:-len(closer)], expected, ("tool_calls",))
        yield Mutation("text_after_calls", output + TRAILING_TEXT, expected, ("tool_calls",))
        # a call or section opener, not a function's own opener (`<function=NAME>`: without it the name is gone)
        names = [c.name for c in expected.tool_calls]
        openers = [t.value.strip(C_SPACE) for t in params.grammar_triggers
                   if t.type == TriggerType.WORD and not any(n in t.value for n in names)]
        opener = next((o for o in openers if o and output.count(o) == 1), "")
        if opener:
            yield Mutation("missing_call_opener", output.replace(opener, "", 1), expected, ("tool_calls",))
    start = params.thinking_start_tag.strip(C_SPACE)
    if start and params.prompt.rstrip(C_SPACE).endswith(start) and not output.lstrip(C_SPACE).startswith(start) \
            and expected.reasoning_content.strip(C_SPACE):
        yield Mutation("repeated_reasoning_start", start + output, expected,
                       ("reasoning_content", "content", "tool_calls"))
    if calls:
        cut = _cut_in_last_arguments(output, expected)
        if cut is not None:
            yield Mutation("cut_in_last_arguments", cut, expected, ("reasoning_content", "content"))


def _string_leaves(value: object) -> Iterator[str]:
    """The strings of a JSON value that are values (not keys), in document order."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _string_leaves(v)
    elif isinstance(value, list):
        for v in value:
            yield from _string_leaves(v)


def _cut_in_last_arguments(output: str, expected: ChatMessage) -> str | None:
    """`output` cut in the middle of the last string value of the last call's arguments, where it stands after
    the call's name (as written, or JSON-escaped as a JSON format writes it); None when it has none."""
    last = expected.tool_calls[-1]
    try:
        args = json.loads(last.arguments)
    except ValueError:
        return None
    values = [v for v in _string_leaves(args) if len(v) >= 2]
    if not values:
        return None
    after = max(output.rfind(last.name), 0)
    value = values[-1]
    for written in dict.fromkeys((value, json.dumps(value, ensure_ascii=False)[1:-1], json.dumps(value)[1:-1])):
        at = output.rfind(written, after)
        if at >= 0:
            return output[:at + (len(written) + 1) // 2]
    return None


def recovered(mutation: Mutation, got: ChatMessage) -> list[str]:
    """What the parse of a mutated output lost of what it must keep ([] when it recovered)."""
    want = replace(ChatMessage(), **{f: getattr(mutation.expected, f) for f in mutation.checks})
    have = replace(ChatMessage(), **{f: getattr(got, f) for f in mutation.checks})
    problems = message_differences(want, have, compare_ids=False)
    if mutation.kind == "text_after_calls" and TRAILING_TEXT.strip(C_SPACE) not in got.content:
        problems.append(f"content: the text after the calls is lost: {got.content!r}")
    return problems


def recovery_counts(source: str) -> tuple[int, int]:
    """How many of this template's mutated outputs the default parse reads as meant, of how many: the outputs
    of the round-trip scenarios it reads right, broken each way that applies. Never raises."""
    ok = total = 0
    for built, params in expressible_scenarios(source):
        try:
            expected = as_message(built.expected)
            if message_differences(expected, params.parse(built.output), compare_ids=False):
                continue  # the unbroken output is misread already: nothing to recover towards
            broken = list(mutations(params, built.output, expected))
        except Exception:  # the round trip reports what fails here
            continue
        for m in broken:
            total += 1
            with contextlib.suppress(AutoparserError):  # (a raise counts as not recovered)
                ok += not recovered(m, params.parse(m.output))
    return ok, total
