"""The recovery property, as the test suites check it on outputs broken the way models break them.

For one well-formed output of a request and the message it means, each mutation that applies
(autoparser.corpus.mutations) is parsed in the default mode and checked against the invariants of
chat/recover.py: `parse()` does not raise, no text is lost, the strict parse reports no repairs, and the
stream (in chunks) gives the deltas of whole re-parses and ends on the same message. Whether the mutation's
intended fields came back is the outcome's `failure`, which suites compare with their ratchet.
"""

from __future__ import annotations

from dataclasses import dataclass

from autoparser.chat.params import ChatParams
from autoparser.chat.recover import markup_spans, unaccounted
from autoparser.corpus.mutations import mutations, recovered
from autoparser.errors import ParseError
from autoparser.testing.streaming import stream_mismatch
from autoparser.types import ChatMessage

__all__ = ["MutationOutcome", "check_mutations"]


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
    lenient = params.recovery_or_strict().lenient
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
        lost = unaccounted(m.output, got, markup_spans(lenient, params.generation_prompt, m.output,
                                                     params.format))
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
