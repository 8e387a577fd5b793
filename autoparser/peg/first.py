"""FIRST sets: which characters can start a match of a parser, so a choice can skip alternatives that
cannot match at all.

Skipping is exact, not a heuristic: an alternative is skipped only when it is not nullable and the next
character is outside its FIRST set, in which case evaluating it would give FAIL (a literal, a character
class or `any` can neither succeed nor ask for more input on a character it cannot start with, and every
composite inherits that). Lookaheads make no such promise (a `negate` of a cut-off literal asks for more
input), so they, like `until`, string content and negated or large classes, count as "may start with
anything". Undecodable input disables skipping altogether (see engine.Ctx.escapes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import assert_never

from autoparser.peg import nodes as N
from autoparser.peg.arena import Arena
from autoparser.peg.nodes import C_SPACE, ParserId

_MAX_CLASS = 256
_SPACE = frozenset(C_SPACE)


@dataclass(frozen=True, slots=True)
class First:
    chars: frozenset[str] | None  # None: any character may start a match
    nullable: bool


_ANY = First(None, True)
_EMPTY = First(frozenset(), True)


def _union(a: frozenset[str] | None, b: frozenset[str] | None) -> frozenset[str] | None:
    return None if a is None or b is None else a | b


class FirstSets:
    def __init__(self, arena: Arena) -> None:
        self.arena = arena
        self.memo: dict[ParserId, First] = {}
        self.active: set[ParserId] = set()

    def of(self, pid: ParserId) -> First:
        done = self.memo.get(pid)
        if done is not None:
            return done
        if pid in self.active:  # recursion through rules: give up on precision, stay correct
            return _ANY
        self.active.add(pid)
        try:
            result = self._compute(self.arena.parsers[pid])
        finally:
            self.active.discard(pid)
        self.memo[pid] = result
        return result

    def _compute(self, node: N.Node) -> First:
        match node:
            case N.Epsilon() | N.Start() | N.End():
                return _EMPTY
            case N.Literal(literal=s):
                return First(frozenset(s[0]), False) if s else _EMPTY
            case N.Sequence(children=ch):
                chars: frozenset[str] | None = frozenset()
                for c in ch:
                    f = self.of(c)
                    chars = _union(chars, f.chars)
                    if not f.nullable:
                        return First(chars, False)
                return First(chars, True)
            case N.Choice(children=ch):
                chars = frozenset()
                nullable = False
                for c in ch:
                    f = self.of(c)
                    chars = _union(chars, f.chars)
                    nullable = nullable or f.nullable
                return First(chars, nullable)
            case N.Repetition(child=c, min_count=lo):
                f = self.of(c)
                return First(f.chars, f.nullable or lo == 0)
            case N.Space():
                return First(_SPACE, True)
            case N.Chars(ranges=rs, negated=neg, min_count=lo):
                size = sum(max(0, r.end - r.start + 1) for r in rs)
                if neg or size > _MAX_CLASS:
                    return First(None, lo == 0)
                return First(frozenset(chr(cp) for r in rs for cp in range(r.start, r.end + 1)), lo == 0)
            case N.Rule(child=c) | N.Tag(child=c) | N.Atomic(child=c) | N.Schema(child=c) | N.Gbnf(child=c) \
                    | N.Ac(child=c):
                return self.of(c)
            case N.Ref(name=name):
                rid = self.arena.rules.get(name)
                return self.of(rid) if rid is not None else _ANY
            case N.Any_() | N.String() | N.Until() | N.And() | N.Not():
                # any character may start them (a lookahead matches nothing, so it cannot skip a choice)
                return _ANY
        assert_never(node)


def dispatch_table(arena: Arena, firsts: FirstSets, children: tuple[ParserId, ...]
                   ) -> tuple[dict[str, tuple[int, ...]], tuple[int, ...]] | None:
    """For a choice: per starting character, the indexes of the children worth trying (in order), and the
    indexes to try for any other character. None when no child can ever be skipped."""
    infos = [firsts.of(c) for c in children]
    if all(f.chars is None or f.nullable for f in infos):
        return None
    always = tuple(i for i, f in enumerate(infos) if f.chars is None or f.nullable)
    keyed: set[str] = set()
    for f in infos:
        if f.chars is not None and not f.nullable:
            keyed |= f.chars
    table = {
        ch: tuple(i for i, f in enumerate(infos) if f.chars is None or f.nullable or ch in f.chars)
        for ch in keyed
    }
    return table, always
