"""The recovery property, as the test suites check it on outputs broken the way models break them.

For one well-formed output of a request and the message it means, each mutation that applies
(autoparser.corpus.mutations) is parsed in the default mode and checked against the invariants of
autoparser/recovery: `parse()` does not raise, no text is lost, the strict parse reports no repairs, and the
stream (in chunks) gives the deltas of whole re-parses and ends on the same message. Whether the mutation's
intended fields came back is the outcome's `failure`, which suites compare with their ratchet.

"No text lost" is checked here by words (`unaccounted`), independently of the spans the recovery accounts for
at run time (recovery/coverage.py): a test of the guarantee, not a copy of it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from autoparser.chat.tags import FIELD_TAGS, SCAN_TO_CALLS
from autoparser.corpus.mutations import mutations, recovered
from autoparser.errors import ParseError
from autoparser.params import ChatParams
from autoparser.peg import AstNode
from autoparser.recovery.checks import call_positions
from autoparser.recovery.completion import complete_at_end, parse_text, viable_prefix
from autoparser.recovery.coverage import SPECIAL_TOKEN
from autoparser.testing.streaming import stream_mismatch
from autoparser.types import ChatMessage

__all__ = ["MutationOutcome", "check_mutations", "markup_spans", "unaccounted"]


@dataclass(frozen=True)
class MutationOutcome:
    case: str
    """`<case>::<mutation kind>`."""
    failure: str | None
    """What the default parse lost of what the mutation keeps; None when it recovered it."""
    bugs: tuple[str, ...]
    """Invariants the parse broke (never acceptable, whatever the ratchet says)."""


def check_mutations(params: ChatParams, output: str, expected: ChatMessage, case: str,
                    stream_step: int = 5) -> list[MutationOutcome]:
    """One outcome per mutation of `output` that applies."""
    outcomes = []
    for m in mutations(params, output, expected):
        name = f"{case}::{m.kind}"
        bugs: list[str] = []
        try:
            got = params.parse(m.output)
        except Exception as e:  # never: a complete output always parses
            outcomes.append(MutationOutcome(name, f"raised {type(e).__name__}", (
                f"{name}: parse() raised {type(e).__name__}: {e}",)))
            continue
        lost = unaccounted(m.output, got, markup_spans(params, m.output, got))
        if lost:
            bugs.append(f"{name}: text lost: {dict(lost)} from {m.output!r} -> {got}")
        try:
            strict = params.parse(m.output, strict=True)
            if strict.diagnostics:
                bugs.append(f"{name}: the strict parse reports repairs: {strict.diagnostics}")
        except ParseError:
            pass  # llama.cpp's verdict on a malformed output
        mismatch = stream_mismatch(params, m.output, range(stream_step, len(m.output.encode()), stream_step))
        if mismatch:
            bugs.append(f"{name}: {mismatch}")
        outcomes.append(MutationOutcome(name, "; ".join(recovered(m, got)) or None, tuple(bugs)))
    return outcomes



def markup_spans(params: ChatParams, output: str, message: ChatMessage | None = None) -> list[tuple[int, int]]:
    """The spans of `output` the relaxed parser reads as markup (the strict parser, where its reading stands:
    it reads the output whole, or the relaxed parser cannot read it): consumed by its parse (of the longest
    prefix it can read, with the closers it waits for at the end) but inside no node whose text goes into a
    message field. With the `message` the default parse gave: where it says it kept a text as content and read on
    after it (`unparsed_text` followed by more than special tokens), the spans of the output read without
    those texts, as the reading resumes; where it says the reasoning start was left out and the relaxed parser
    cannot read the output to its end, the spans of the output read with that start before it, as the reading
    does (`Reader.with_reasoning_opened`)."""
    opener, reader = params.reader.plan.reasoning_start, params.reader
    if message is not None and opener and any(d.kind == "missing_reasoning_start" for d in message.diagnostics):
        effective = reader.generation_prompt + output
        result = reader.complete_parse(effective)
        if not result.success or result.end < len(effective):
            n = len(opener)
            return [(max(a - n, 0), b - n) for a, b in markup_spans(params, opener + output) if b > n]
    skipped = sorted((d.position, d.position + len(d.raw)) for d in (message.diagnostics if message else ())
                     if d.kind == "unparsed_text" and d.raw and output.startswith(d.raw, d.position)
                     and SPECIAL_TOKEN.sub("", output[d.position + len(d.raw):]).strip())
    if not skipped:
        return _markup_spans(params, output)
    kept: list[str] = []  # the output without the skipped texts
    where: list[int] = []  # where each of its characters is in the output
    pos = 0
    for start, end in skipped:
        if start >= pos:
            kept.append(output[pos:start])
            where.extend(range(pos, start))
            pos = end
    kept.append(output[pos:])
    where.extend(range(pos, len(output) + 1))
    spans: list[tuple[int, int]] = []
    for a, b in _markup_spans(params, "".join(kept)):  # (a span the cut splits is split there)
        for i in range(a, b):
            if spans and spans[-1][1] == where[i]:
                spans[-1] = (spans[-1][0], where[i] + 1)
            else:
                spans.append((where[i], where[i] + 1))
    return spans


def _markup_spans(params: ChatParams, output: str) -> list[tuple[int, int]]:
    reader = params.reader
    arena, offset = reader.plan.relaxed, reader.offset
    effective = reader.generation_prompt + output
    strict = reader.strict_parse(output)
    result, read = (strict.result if strict.reads_all else reader.complete_parse(effective)), len(effective)
    if result.fail and strict.result.success and not strict.dropped:
        # (the relaxations cannot read it, and the strict reading stands: `Reader.reading`)
        result = strict.result
    if result.fail:
        result = parse_text(arena, effective[:viable_prefix(arena, effective, offset)])
    elif not result.success:
        result = complete_at_end(arena, reader.plan.closers, effective, reader.format)[0]
    elif result.end < read and (split := reader.split_at_unread_call(
            output, result.end - offset, len(call_positions(result, offset)))) is not None \
            and split[0].result is not None:
        # (the parse stopped before a call it cannot read to its end: the reading reads what of it it can)
        result, read = split[0].result, offset + split[1]
    ast = result.ast

    def innermost(node: AstNode) -> bool:  # tagged arguments' tool-args node holds their markup too
        return not any(d.tag in FIELD_TAGS for d in ast.walk(node.children))

    # (what a scan to the first call steps over is text, not markup: the message must hold it, or say it kept it)
    fields = sorted((n.start, n.end) for n in ast.walk(result.nodes)
                    if (n.tag in FIELD_TAGS and innermost(n)) or n.rule == SCAN_TO_CALLS)
    spans, pos = [], max(result.start, offset)
    for start, end in fields:
        if start > pos:
            spans.append((pos, start))
        pos = max(pos, end)
    end = min(result.end, read)  # (not the closers the completion added)
    if end > pos:
        spans.append((pos, end))
    return [(a - offset, b - offset) for a, b in spans if b > offset]


_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{4}|.)")
# An entity is how a template escapes a character in an attribute (`tool="echo&amp;log"` for `echo&log`): its name
# is no word of the model's.
_ENTITY = re.compile(r"&(?:[A-Za-z]+|#[0-9]+|#x[0-9A-Fa-f]+);")


def _words(text: str) -> list[str]:
    """The words of a text, JSON escapes read as separators (`\\n` is no `n`)."""
    return re.findall(r"\w+", _ESCAPE.sub(" ", text))


_PYTHON_LITERALS = {"True": "true", "False": "false", "None": "null"}


def unaccounted(output: str, message: ChatMessage, markup: Iterable[tuple[int, int]]) -> Counter[str]:
    """The words of `output` (runs of letters, digits, underscores) found neither in a field of `message`
    (content, reasoning, a call's name, arguments or id), nor in markup (`markup_spans`) or a special token, nor
    in a diagnostic's raw text: empty when no text was lost. Counted with their multiplicity."""
    chars = list(output)
    for start, end in markup:
        chars[max(start, 0):end] = " " * (min(end, len(chars)) - max(start, 0))
    rest = _ENTITY.sub(" ", SPECIAL_TOKEN.sub(" ", "".join(chars)))
    texts = [message.content, message.reasoning_content, *(d.raw for d in message.diagnostics)]
    for call in message.tool_calls:
        texts += [call.name, call.arguments, call.id]
    # Each word is looked for inside the fields' text and used up there: a marker between two words of a field
    # (`assistant<|content|>The`) joins them in the field, and that is no loss.
    have = "\x00".join(_ESCAPE.sub(" ", t) for t in texts)
    lost: Counter[str] = Counter()
    for word in _words(rest):
        whole = re.search(rf"(?<!\w){re.escape(word)}(?!\w)", have)
        if whole is None and word in _PYTHON_LITERALS:  # a python-style call's value, as its JSON literal
            word = _PYTHON_LITERALS[word]
            whole = re.search(rf"(?<!\w){word}(?!\w)", have)
        at = whole.start() if whole else have.find(word)
        if at >= 0:
            have = have[:at] + "\x00" * len(word) + have[at + len(word):]
            continue
        # a word the output writes across two fields, a marker between them left out (GLM's call name and its
        # first argument's name, `<tool_call>NAMEkey</arg_key>`): each part a whole word of a field, used up
        for i in range(1, len(word)):
            head = re.search(rf"(?<!\w){re.escape(word[:i])}(?!\w)", have)
            tail = re.search(rf"(?<!\w){re.escape(word[i:])}(?!\w)", have)
            if head and tail and (head.end() <= tail.start() or tail.end() <= head.start()):
                for m in (head, tail):
                    have = have[:m.start()] + "\x00" * (m.end() - m.start()) + have[m.end():]
                break
        else:
            lost[word] += 1
    return lost
