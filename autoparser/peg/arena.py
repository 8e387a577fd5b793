"""The arena: every parser node of one grammar, its named rules and its root.

Built once by the builder (or loaded from JSON), then immutable. Parsing compiles the arena to closures once
(cached on the arena) and runs them, or code generated for it once its grammar is hot; see evaluate.py.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, assert_never

from autoparser.errors import GrammarError
from autoparser.peg import nodes as N
from autoparser.peg.nodes import INVALID_ID, Node, ParserId

if TYPE_CHECKING:
    from autoparser.peg.engine import ParseResult
    from autoparser.peg.evaluate import EvaluatorState


class Arena:
    __slots__ = ("evaluator_state", "parsers", "root", "rules")

    def __init__(self, parsers: list[Node] | tuple[Node, ...] = (), rules: dict[str, ParserId] | None = None,
                 root: ParserId = INVALID_ID) -> None:
        self.parsers: tuple[Node, ...] = tuple(parsers)
        self.rules: dict[str, ParserId] = dict(rules or {})
        self.root: ParserId = root
        # What evaluate.py keeps for this arena between parses (its closures, first sets and use counts): set and
        # read by evaluate.entry_function only; None until the first parse.
        self.evaluator_state: EvaluatorState | None = None

    def __len__(self) -> int:
        return len(self.parsers)

    def empty(self) -> bool:
        return not self.parsers

    def get(self, pid: ParserId) -> Node:
        return self.parsers[pid]

    def has_rule(self, name: str) -> bool:
        return name in self.rules

    def get_rule(self, name: str) -> ParserId:
        try:
            return self.rules[name]
        except KeyError:
            raise GrammarError(f"Rule not found: {name}") from None

    # --- parsing -----------------------------------------------------------------------------------------

    def parse(self, text: str | bytes, *, partial: bool = False, start: int = 0, parser: ParserId | None = None,
              trace: bool = False) -> ParseResult:
        """Parse `text` from `start` with the root (or `parser`). Failure is a FAIL result, not an exception.

        `partial`: the input may continue (the C++ LENIENT flag), so running out of it gives NEED_MORE_INPUT.
        """
        from autoparser.peg.evaluate import run

        pid = self.root if parser is None else parser
        if pid == INVALID_ID:
            raise GrammarError("No root parser set")
        return run(self, pid, text, partial=partial, start=start, trace=trace)

    # --- inspection ----------------------------------------------------------------------------------------

    def dump(self, pid: ParserId | None = None) -> str:
        """PEG notation of a parser (rules by name, so recursion prints finitely)."""
        return _dump(self, self.root if pid is None else pid, top=True)

    def __str__(self) -> str:
        lines = [f"{name} <- {_dump(self, self.parsers[rid].child, top=True)}"  # type: ignore[union-attr]
                 for name, rid in sorted(self.rules.items()) if isinstance(self.parsers[rid], N.Rule)]
        if self.root != INVALID_ID:
            lines.append(f"root <- {self.dump()}")
        return "\n".join(lines)


def resolve_refs(parsers: list[Node], rules: dict[str, ParserId], root: ParserId) -> ParserId:
    """Point every child id that names a `ref` node straight at its rule (in place); return the new root."""

    def resolve(pid: ParserId) -> ParserId:
        node = parsers[pid]
        if isinstance(node, N.Ref):
            if node.name not in rules:
                raise GrammarError(f"Rule not found: {node.name}")
            return rules[node.name]
        return pid

    for i, node in enumerate(parsers):
        if isinstance(node, (N.Sequence, N.Choice)):
            kids = tuple(resolve(c) for c in node.children)
            if kids != node.children:
                parsers[i] = replace(node, children=kids)
        elif isinstance(node, (N.Repetition, N.And, N.Not, N.Schema, N.Rule, N.Atomic, N.Tag, N.Gbnf, N.Ac)):
            kid = resolve(node.child)
            if kid != node.child:
                parsers[i] = replace(node, child=kid)
    return resolve(root) if root != INVALID_ID else root


def _lit(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r") + '"'


def _dump(arena: Arena, pid: ParserId, top: bool = False, depth: int = 0) -> str:
    if depth > 60:
        return "…"
    node = arena.parsers[pid]
    d = depth + 1
    match node:
        case N.Epsilon():
            return "ε"
        case N.Start():
            return "^"
        case N.End():
            return "$"
        case N.Literal(literal=s):
            return _lit(s)
        case N.Sequence(children=ch):
            inner = " ".join(_dump(arena, c, depth=d) for c in ch)
            return inner if top else f"({inner})"
        case N.Choice(children=ch):
            inner = " | ".join(_dump(arena, c, depth=d) for c in ch)
            return inner if top else f"({inner})"
        case N.Repetition(child=c, min_count=lo, max_count=hi):
            suffix = {(0, 1): "?", (0, -1): "*", (1, -1): "+"}.get((lo, hi))
            if suffix is None:
                suffix = f"{{{lo},}}" if hi == -1 else (f"{{{lo}}}" if lo == hi else f"{{{lo},{hi}}}")
            return _dump(arena, c, depth=d) + suffix
        case N.And(child=c):
            return "&" + _dump(arena, c, depth=d)
        case N.Not(child=c):
            return "!" + _dump(arena, c, depth=d)
        case N.Any_():
            return "."
        case N.Space():
            return "space"
        case N.Chars(pattern=p, min_count=lo, max_count=hi):
            suffix = "" if (lo, hi) == (1, 1) else {(0, 1): "?", (0, -1): "*", (1, -1): "+"}.get((lo, hi), f"{{{lo},{hi}}}")
            return p + suffix
        case N.String(delimiter=dl):
            return f"string({dl!r})"
        case N.Until(delimiters=ds):
            return f"until({', '.join(_lit(x) for x in ds)})" if ds else "rest"
        case N.Schema(child=c, name=name):
            return f"schema<{name}>({_dump(arena, c, top=True, depth=d)})"
        case N.Rule(name=name, child=c):
            return _dump(arena, c, top=True, depth=d) if top and depth == 0 else name
        case N.Ref(name=name):
            return name
        case N.Atomic(child=c):
            return f"atomic({_dump(arena, c, top=True, depth=d)})"
        case N.Tag(child=c, tag=t):
            return f"{t}:({_dump(arena, c, top=True, depth=d)})"
        case N.Gbnf(child=c):
            return _dump(arena, c, depth=d)
        case N.Ac(child=c):
            return _dump(arena, c, depth=d)
    assert_never(node)
