"""A rule-free, tag-free PEG subtree as one regex with the same outcome, for the generated code's fast path.

A PEG choice commits to its first alternative that matches and a repetition never gives back what it consumed;
Python's atomic groups and possessive quantifiers (3.11+) do the same, so a subtree of literals, character
classes, string bodies, spaces, choices, repetitions and predicates matches where, and as far as, the PEG does
-- on text with no escaped bytes, and as long as no decision looked at the end of the input. The engine records
those decisions (`observed`) and may answer NEED_MORE_INPUT there, so the fast path is taken only when the match
ends at least `reach` characters before the end: `reach` bounds how far past its end the subtree may look, on
the way to this match, failed alternatives included (`Regular.reach`). Everywhere else, and when the regex does
not match, the node's own code decides (peg/codegen.py); the differential tests compare both on every prefix.
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from autoparser.peg import nodes as N
from autoparser.peg.engine import class_regex, string_body_regex

if TYPE_CHECKING:
    from autoparser.peg.arena import Arena
    from autoparser.peg.nodes import ParserId

__all__ = ["AVAILABLE", "Regular", "concatenation", "regular"]

# Atomic groups and possessive quantifiers are Python 3.11's: before it there is no fast path.
AVAILABLE = sys.version_info >= (3, 11)

_INF = math.inf
_SPACE = f"[{N.C_SPACE}]*+"


@dataclass(frozen=True)
class Regular:
    pattern: str
    """The regex, matching exactly where and as far as the subtree does (atomic: one way only)."""
    reach: float
    """On a match: how many positions from its end on the subtree may have looked at (the match is the PEG's
    result without any end-of-input decision when end + reach <= the text's length)."""
    fail: float
    """On a mismatch: how many positions from its start on it may have looked at (inf: unbounded)."""
    fallible: bool
    maxlen: float
    """The longest match (inf: unbounded)."""
    nullable: bool
    """It may match the empty string."""
    size: int
    """Nodes in the subtree (what the fast path saves is about proportional to it)."""


def regular(arena: Arena, pid: ParserId, memo: dict[ParserId, Regular | None]) -> Regular | None:
    """The regex form of `pid`'s subtree, or None where it holds a node a regex cannot stand for (a rule, a
    tag, an `until`, the input's start or end) or where Python has no atomic groups."""
    if not AVAILABLE:
        return None
    if pid in memo:
        return memo[pid]
    memo[pid] = None  # (a cycle goes through a rule, which is not regular anyway)
    found = _regular(arena, arena.parsers[pid], memo)
    memo[pid] = found
    return found


def _regular(arena: Arena, node: N.Node, memo: dict[ParserId, Regular | None]) -> Regular | None:
    match node:
        case N.Epsilon():
            return Regular("", 0, 0, False, 0, True, 1)
        case N.Literal(literal=s):
            return Regular(re.escape(s), 0, len(s), bool(s), len(s), not s, 1)
        case N.Any_():
            return Regular(r"[\s\S]", 0, 1, True, 1, False, 1)
        case N.Space():
            return Regular(_SPACE, 1, 0, False, _INF, True, 1)
        case N.Chars(min_count=lo, max_count=hi):
            quant = f"{{{lo},}}+" if hi == -1 else f"{{{lo},{hi}}}+"
            stops_short = hi == -1 or hi > lo  # a run that stops before its maximum looked at the next character
            return Regular(f"(?:{class_regex(node).pattern}){quant}", 1 if stops_short else 0, lo, lo > 0,
                           _INF if hi == -1 else hi, lo == 0, 1)
        case N.String(delimiter=d):
            # the body as far as it goes, then its delimiter, which the node does not consume
            return Regular(f"(?>{string_body_regex(d).pattern})(?={re.escape(d)})", 1, _INF, True, _INF, True, 1)
        case N.Sequence(children=children):
            parts = [p for c in children if (p := regular(arena, c, memo)) is not None]
            return concatenation(parts) if len(parts) == len(children) else None
        case N.Choice(children=children):
            alts = [a for c in children if (a := regular(arena, c, memo)) is not None]
            return _choice(alts) if len(alts) == len(children) else None
        case N.Repetition(child=c, min_count=lo, max_count=hi):
            x = regular(arena, c, memo)
            return None if x is None else _repetition(x, lo, hi)
        case N.Not(child=c):
            x = regular(arena, c, memo)
            if x is None:
                return None
            return Regular(f"(?!{x.pattern})", x.fail if x.fallible else 0, x.maxlen + x.reach, True, 0, True,
                           x.size + 1)
        case N.And(child=c):
            x = regular(arena, c, memo)
            if x is None:
                return None
            return Regular(f"(?={x.pattern})", x.maxlen + x.reach, x.fail, x.fallible, 0, True, x.size + 1)
        case N.Atomic(child=c) | N.Schema(child=c) | N.Gbnf(child=c) | N.Ac(child=c):
            return regular(arena, c, memo)  # (they change what a match makes, not where it ends)
        case N.Tag() | N.Rule() | N.Ref() | N.Until() | N.Start() | N.End():
            return None
    return None


def concatenation(parts: list[Regular]) -> Regular:
    """Subtrees one after the other (a sequence node, or a run of a sequence's children)."""
    reach = max((p.reach for p in parts), default=0)
    fail, consumed, looked = 0.0, 0.0, 0.0
    for p in parts:
        if p.fallible:
            # failing here: the parts before consumed up to `consumed` and looked up to `looked` past their ends
            fail = max(fail, consumed + max(p.fail, looked))
        looked = max(looked, p.reach)
        consumed += p.maxlen
    # (each part is atomic already: a literal, a possessive run, an atomic group or a lookaround)
    return Regular("".join(p.pattern for p in parts), reach, fail,
                   any(p.fallible for p in parts), consumed, all(p.nullable for p in parts),
                   sum(p.size for p in parts))


def _choice(alts: list[Regular]) -> Regular:
    reach, failed = 0.0, 0.0  # failed: how far the alternatives tried before looked past the start
    for a in alts:
        reach = max(reach, a.reach, failed)
        if not a.fallible:
            break  # (the ones after are never tried)
        failed = max(failed, a.fail)
    return Regular("(?>" + "|".join(a.pattern for a in alts) + ")", reach, failed, all(a.fallible for a in alts),
                   max(a.maxlen for a in alts), any(a.nullable for a in alts), sum(a.size for a in alts) + 1)


def _repetition(x: Regular, lo: int, hi: int) -> Regular | None:
    if (lo, hi) == (0, 1):
        # tried unless at the end (that check looks at the start); a mismatch or an empty match counts zero
        return Regular(f"(?:{x.pattern})?+", max(1, x.reach, x.fail if x.fallible else 0), 0, False, x.maxlen,
                       True, x.size + 1)
    if x.nullable:
        return None  # (the engine stops at an empty match without counting it; a regex counts it)
    # each try at a position looks at it first (the end check); one stopped by the count looks no further
    stop = max(1, x.reach, x.fail if x.fallible else 0)
    reach = x.reach if hi == lo else stop
    fail = 0.0 if lo == 0 else stop if lo == 1 else (lo - 1) * x.maxlen + stop
    maxlen = _INF if hi == -1 else hi * x.maxlen
    quant = f"{{{lo},}}+" if hi == -1 else f"{{{lo},{hi}}}+"
    return Regular(f"(?:{x.pattern}){quant}", reach, fail, lo > 0, maxlen, lo == 0, x.size + 1)
