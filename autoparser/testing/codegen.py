"""Checks the generated code of autoparser.peg.codegen against the closures it must agree with exactly.

`CodegenCheck(arena, pid)` compiles `pid` once; `mismatch(text, partial)` runs both on the text and says how
they differ (None when the result tuples, the AST nodes made -- including those of abandoned alternatives,
whose ids shift every later one --, the end-of-input observations and any depth error are identical). Used
by the random-grammar property tests and the per-chat-case differential tests.

    check = CodegenCheck(arena, arena.root)
    assert check.mismatch(text, partial=True) is None
"""

from __future__ import annotations

from typing import Any

from autoparser.peg.arena import Arena
from autoparser.peg.codegen import compile_entry
from autoparser.peg.engine import Ctx, Fn, TooDeep, compile_arena
from autoparser.peg.evaluate import ensure_recursion_room
from autoparser.peg.first import FirstSets
from autoparser.peg.nodes import ParserId
from autoparser.peg.utf8 import to_text

__all__ = ["CodegenCheck"]


def _outcome(fn: Fn, text: str, partial: bool, start: int) -> tuple[Any, ...]:
    ctx = Ctx(text, partial)
    try:
        raw: Any = fn(ctx, start)
    except TooDeep as deep:
        raw = ("too deep", deep.pos)
    except RecursionError:
        raw = ("recursion",)
    return raw, ctx.ast, ctx.observed


class CodegenCheck:
    def __init__(self, arena: Arena, pid: ParserId) -> None:
        firsts = FirstSets(arena)
        closures = compile_arena(arena, firsts=firsts)
        self.closure = closures[pid]
        self.generated = compile_entry(arena, pid, closures, firsts)

    def mismatch(self, data: str | bytes, *, partial: bool, start: int = 0) -> str | None:
        ensure_recursion_room()
        text = to_text(data)
        want = _outcome(self.closure, text, partial, start)
        got = _outcome(self.generated, text, partial, start)
        if got == want:
            return None
        labels = ("result (type, end, node ids, invalid bytes)", "AST nodes", "observations")
        for label, w, g in zip(labels, want, got, strict=True):
            if w != g:
                return f"{label} differ on {text!r} (partial={partial}):\n  closures:  {w!r}\n  generated: {g!r}"
        return None  # pragma: no cover - the tuples differ, so one of their parts does
