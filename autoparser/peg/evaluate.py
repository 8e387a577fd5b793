"""Running an arena: engine.py's closures at first, generated code (codegen.py) once a grammar has proved hot.

Generated code runs the engine 9-35% faster than the closures on the benchmark inputs (engine alone, measured
2026-11-24; tests/peg/test_codegen.py checks it gives identical results), but writing and compiling it costs
2-17 ms: about what 256 parses of a tool-call output cost on the closures, while a request's own stream parses
from the start a few dozen times at most. So the choice is ski-rental (buy once the rent paid equals the
price): a grammar runs on its closures until grammars of the same structure (one arena per request; typically
the same template and tools again) have been parsed COMPILE_AFTER times in all, then they share one compiled
function per entry node. Structures are told apart by the nodes' reprs, computed once an arena has been parsed
KEY_AFTER times (a third of a millisecond for a tool grammar), and the table of structures is bounded (least
recently used out first).

Thread safety: the structure table is locked; counters may race (a compilation happens a little early or late,
or twice); results do not, since both paths compute the same thing.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from autoparser.errors import ParseError
from autoparser.peg.ast import Ast
from autoparser.peg.codegen import compile_entry
from autoparser.peg.engine import MAX_RULE_DEPTH, Ctx, Fn, ParseResult, ResultType, TooDeep, compile_arena
from autoparser.peg.first import FirstSets
from autoparser.peg.nodes import ParserId
from autoparser.peg.utf8 import to_text

if TYPE_CHECKING:
    from autoparser.peg.arena import Arena

__all__ = ["COMPILE_AFTER", "KEY_AFTER", "MAX_STRUCTURES", "EvaluatorState", "ensure_recursion_room", "entry_function",
           "run", "tiering"]

KEY_AFTER = 8
COMPILE_AFTER = 256
MAX_STRUCTURES = 128


@dataclass(eq=False)
class _Structure:
    """What arenas of one structure share: how often they were parsed, and the compiled entries."""

    uses: int = 0
    entries: dict[ParserId, Fn] = field(default_factory=dict)


@dataclass(eq=False)
class EvaluatorState:
    """Cached on the arena (Arena.evaluator_state): its closures and the first sets they dispatch on, how often
    it was parsed, and its structure once known."""

    firsts: FirstSets
    closures: list[Fn]
    uses: int = 0
    structure: _Structure | None = None


_structures: OrderedDict[tuple[object, ...], _Structure] = OrderedDict()


_structures_lock = threading.Lock()  # lookup, insertion and eviction together (once per arena, so uncontended)


def _structure_of(arena: Arena) -> _Structure:
    key = (tuple(map(repr, arena.parsers)), tuple(sorted(arena.rules.items())))
    with _structures_lock:
        found = _structures.get(key)
        if found is None:
            found = _structures[key] = _Structure()
            if len(_structures) > MAX_STRUCTURES:
                _structures.popitem(last=False)
        else:
            _structures.move_to_end(key)
        return found


@contextmanager
def tiering(*, key_after: int, compile_after: int) -> Iterator[None]:
    """Within the block, use other thresholds (tests force compiled code; benchmarks time the closures with
    huge ones). Not thread-safe: the thresholds are module state."""
    global KEY_AFTER, COMPILE_AFTER
    saved = KEY_AFTER, COMPILE_AFTER
    KEY_AFTER, COMPILE_AFTER = key_after, compile_after
    try:
        yield
    finally:
        KEY_AFTER, COMPILE_AFTER = saved


def entry_function(arena: Arena, pid: ParserId) -> Fn:
    """The function that evaluates `pid` in `arena` on this call (closure or compiled code, see above)."""
    state = arena.evaluator_state
    if state is None:
        firsts = FirstSets(arena)
        state = arena.evaluator_state = EvaluatorState(firsts, compile_arena(arena, firsts=firsts))
    state.uses += 1
    structure = state.structure
    if structure is None:
        if state.uses < KEY_AFTER:
            return state.closures[pid]
        structure = state.structure = _structure_of(arena)
    structure.uses += 1
    fn = structure.entries.get(pid)
    if fn is None:
        if structure.uses < COMPILE_AFTER:
            return state.closures[pid]
        try:
            fn = compile_entry(arena, pid, state.closures, state.firsts)
        except (SyntaxError, RecursionError, MemoryError):
            # CPython's compiler limits (nesting, size): codegen.py splits functions to stay within them, and
            # tests compile every chat case's grammar and a fifth of the corpus's; should a grammar still
            # exceed them, its closures serve.
            fn = state.closures[pid]
        structure.entries[pid] = fn
    return fn


_TYPES = (ResultType.FAIL, ResultType.SUCCESS, ResultType.NEED_MORE_INPUT)  # by value; no Enum.__call__
# Python frames one rule level of evaluation takes (the rule, its node closures, ...): the stack room below is
# sized from it, and a grammar nesting deeper between rules meets the RecursionError handled in run().
_FRAMES_PER_RULE = 8
_NEEDED_FRAMES = MAX_RULE_DEPTH * _FRAMES_PER_RULE + 2000


def ensure_recursion_room() -> None:
    # Evaluation recurses through Python frames; give it room for MAX_RULE_DEPTH nested rules so that the depth
    # guard, not a RecursionError, is what stops pathological input. Done at import as well as per parse, so
    # the first parse does not change interpreter state under callers that watch it (hypothesis warns).
    if sys.getrecursionlimit() < _NEEDED_FRAMES:
        sys.setrecursionlimit(_NEEDED_FRAMES)


ensure_recursion_room()


def run(arena: Arena, pid: ParserId, data: str | bytes, *, partial: bool, start: int = 0,
        trace: bool = False) -> ParseResult:
    text = to_text(data)
    fn = compile_arena(arena, trace=True)[pid] if trace else entry_function(arena, pid)
    ctx = Ctx(text, partial)
    if trace:
        ctx.trace = []
    ensure_recursion_room()
    try:
        t, e, nd, iv = fn(ctx, start)
    except TooDeep as deep:
        raise ParseError(f"input nested more than {MAX_RULE_DEPTH} levels deep", text=text,
                         position=deep.pos) from None
    except RecursionError:
        # Grammars whose nodes nest deeper than _FRAMES_PER_RULE between rules (or loaded arenas with a
        # rule-free cycle) exhaust the Python stack before the rule-depth guard trips.
        raise ParseError("grammar recursion too deep for this input", text=text, position=start) from None
    ast = Ast()
    ast.nodes = ctx.ast
    return ParseResult(_TYPES[t], start, e, nd, iv, ast, text, tuple(ctx.trace or ()), tuple(ctx.observed))
