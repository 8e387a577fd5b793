"""Compiling an arena to Python source: one function per rule, every other node inlined into it.

The closures of engine.py cost one Python call, one result tuple and its unpacking per node visit; a tool call's
JSON arguments visit ~150 nodes, so that overhead, not the matching, is most of a parse. Here each rule (and
the root) becomes one generated function whose body is its whole subtree written out: sequences advance a local
position, choices and repetitions are loops, literals are `str.startswith`, spaces a set test, and results pass
between nodes in four locals (t, e, nd, iv: type, end, AST node ids, invalid-byte records) instead of tuples.

A rule-free, tag-free subtree of a few nodes (a JSON number, `space "," space`) is first tried as one regex
(peg/regular.py): one C call instead of a line per node.

Exactness: the generated code only takes fast paths whose outcome the closure would reach as well (a literal
that matches, a string body that ends in its quote, a class run followed by a character outside the class, a
regex match that ends far enough from the end of the input that no decision looked at it);
everything else -- partial matches at the end of the input, escaped bytes, `until` scans, missing rules -- calls
the node's closure from engine.py, which stays the one statement of the semantics. Evaluation order is the
closures' order, so the AST node ids, `observed` records and trace-free results are identical (differential
tests in tests/peg/test_codegen.py compare both on random grammars and on every chat case).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, assert_never

from autoparser.peg import nodes as N
from autoparser.peg.ast import AstNode
from autoparser.peg.engine import (
    MAX_RULE_DEPTH,
    OBS_DROPPED,
    OBSERVED_OTHER,
    SPACE_RUN,
    Fn,
    TooDeep,
    class_run_regex,
    compile_arena,
    string_body_regex,
)
from autoparser.peg.first import FirstSets, dispatch_table
from autoparser.peg.nodes import C_SPACE, ParserId
from autoparser.peg.regular import Regular, concatenation, regular

if TYPE_CHECKING:
    from autoparser.peg.arena import Arena

# Python refuses more than 20 statically nested loops per function and 100 indentation levels per file: a node
# nested deeper than this gets a function of its own.
_MAX_LOOPS = 16
_MAX_INDENT = 60

# A rule-free subtree (or run of a sequence's children) of at least this many nodes is first tried as one regex
# (peg/regular.py): fewer save less than the regex call costs.
_REGEX_MIN_SIZE = 3


def _pays(reg: Regular) -> bool:
    """Whether trying `reg` first pays: a few nodes at least, and a bounded look past its end."""
    return reg.size >= _REGEX_MIN_SIZE and reg.reach < float("inf")


def _sure_mismatch(literal: str) -> int:
    """Remaining input from which a literal that does not match is a plain FAIL: engine._compile_literal
    looks further only when less than the literal is left, or (escaped bytes) less than 4 bytes per character."""
    return max(1, 4 * len(literal))


class _Emitter:
    def __init__(self, arena: Arena, closures: list[Fn] | None, firsts: FirstSets | None) -> None:
        self.arena = arena
        if closures is None or firsts is None:  # both from one compile_arena, or their dispatch could differ
            firsts = FirstSets(arena)
            closures = compile_arena(arena, firsts=firsts)
        self.closures = closures
        self.firsts = firsts
        self.globals: dict[str, Any] = {
            "_E": (), "OTHER": OBSERVED_OTHER, "TooDeep": TooDeep, "AstNode": AstNode, "NEW": tuple.__new__,
            "MAXD": MAX_RULE_DEPTH, "SPACE_MATCH": SPACE_RUN.match,
        }
        self.lines: list[str] = []
        self.indent = 0
        self.loops = 0
        self.uid = 0
        self.roots: dict[ParserId, str] = {}  # node -> name of its generated function
        self.todo: list[ParserId] = []
        self._nodes: dict[ParserId, bool] = {}
        self._inv: dict[ParserId, bool] = {}
        self._regular: dict[ParserId, Regular | None] = {}
        self.plain = 0  # >0 while emitting the exact code a regex fast path falls back to (no regex in it)

    # --- static facts ----------------------------------------------------------------------------------------

    def may_nodes(self, pid: ParserId) -> bool:
        """Whether a success or partial result of `pid` can carry AST node ids (else they are always empty)."""
        return self._may(pid, self._nodes, (N.Rule, N.Tag, N.Ref), ())

    def may_inv(self, pid: ParserId) -> bool:
        """Whether a result of `pid` can carry invalid-byte records (only `until` makes them)."""
        return self._may(pid, self._inv, (N.Until, N.Ref), (N.And, N.Not))

    def _may(self, pid: ParserId, memo: dict[ParserId, bool], yes: tuple[type, ...], no: tuple[type, ...]) -> bool:
        if pid in memo:
            return memo[pid]
        memo[pid] = True  # conservative while a cycle is open (cycles pass through Ref, which is True anyway)
        node = self.arena.parsers[pid]
        if isinstance(node, yes):
            result = True
        elif isinstance(node, no):
            result = False
        elif isinstance(node, N.Sequence | N.Choice):
            result = any(self._may(c, memo, yes, no) for c in node.children)
        elif isinstance(node, N.Repetition | N.Atomic | N.Schema | N.Gbnf | N.Ac | N.Rule | N.Tag):
            result = self._may(node.child, memo, yes, no)
        else:
            result = False
        memo[pid] = result
        return result

    def never_fails(self, pid: ParserId) -> bool:
        """Whether `pid` can only succeed or ask for more input (so callers need no FAIL test)."""
        node = self.arena.parsers[pid]
        match node:
            case N.Epsilon() | N.Space():
                return True
            case N.Repetition(min_count=0):
                return True
            case N.Sequence(children=ch):
                return all(self.never_fails(c) for c in ch)
            case N.Atomic(child=c) | N.Schema(child=c) | N.Gbnf(child=c) | N.Ac(child=c) | N.Tag(child=c):
                return self.never_fails(c)
            case N.Repetition() | N.Start() | N.End() | N.Literal() | N.Choice() | N.And() | N.Not() | N.Any_() \
                    | N.Chars() | N.String() | N.Until() | N.Rule() | N.Ref():
                return False
        assert_never(node)

    # --- output helpers --------------------------------------------------------------------------------------

    def line(self, text: str) -> None:
        self.lines.append("    " * self.indent + text)

    @contextmanager
    def block(self, header: str, loop: bool = False) -> Iterator[None]:
        self.line(header)
        self.indent += 1
        self.loops += loop
        try:
            yield
        finally:
            self.indent -= 1
            self.loops -= loop

    def fresh(self) -> int:
        self.uid += 1
        return self.uid

    def name(self, obj: Any, prefix: str) -> str:
        key = f"{prefix}{self.fresh()}"
        self.globals[key] = obj
        return key

    def closure(self, pid: ParserId) -> str:
        key = f"F{pid}"
        self.globals[key] = self.closures[pid]
        return key

    def root(self, pid: ParserId) -> str:
        if pid not in self.roots:
            self.roots[pid] = f"f{pid}"
            self.todo.append(pid)
        return self.roots[pid]

    def set_empty(self, child: ParserId, parent: ParserId, force: bool = False) -> None:
        """A parent that may carry nodes/records reads nd/iv, which a child that never makes them leaves unset
        (`force`: the parent's result is empty whatever the child made)."""
        if self.may_nodes(parent) and (force or not self.may_nodes(child)):
            self.line("nd = _E")
        if self.may_inv(parent) and (force or not self.may_inv(child)):
            self.line("iv = _E")

    # --- functions ----------------------------------------------------------------------------------------

    def function(self, pid: ParserId) -> None:
        self.indent, self.loops = 0, 0
        with self.block(f"def {self.roots[pid]}(ctx, pos):"):
            self.line("text = ctx.text")
            self.line("n = ctx.n")
            node = self.arena.parsers[pid]
            if isinstance(node, N.Rule):
                self.rule(node.child, "pos", node.name, "")
            else:
                self.node(pid, "pos")
            with self.block("if t == 0:"):
                self.line("return 0, e, _E, _E")
            self.line(f"return t, e, {'nd' if self.may_nodes(pid) else '_E'}, {'iv' if self.may_inv(pid) else '_E'}")
        self.line("")

    # --- nodes: each sets t and e, and nd / iv when may_nodes / may_inv; the position `p` is never modified ---

    def node(self, pid: ParserId, p: str) -> None:
        node = self.arena.parsers[pid]
        if self.indent > _MAX_INDENT or (self.loops > _MAX_LOOPS and isinstance(node, N.Sequence | N.Choice
                                                                                  | N.Repetition)):
            self.line(f"t, e, nd, iv = {self.root(pid)}(ctx, {p})")
            return
        reg = self.regex_worth(pid)
        if reg is not None:
            with self.block(f"if {self.regex_match(reg, p)}:"):
                self.line("t = 1")
            with self.block("else:"), self.exact():
                self.node_code(pid, p)
            return
        self.node_code(pid, p)

    def node_code(self, pid: ParserId, p: str) -> None:
        node = self.arena.parsers[pid]
        match node:
            case N.Epsilon():
                self.line(f"t = 1; e = {p}")
            case N.Start():
                self.line(f"t = 1 if {p} == 0 else 0; e = {p}")
            case N.End():
                with self.block(f"if {p} >= n:"):
                    self.line("ctx.observed.append(OTHER); t = 1")
                with self.block("else:"):
                    self.line("t = 0")
                self.line(f"e = {p}")
            case N.Literal(literal=s):
                with self.block(f"if text.startswith({s!r}, {p}):"):
                    self.line(f"t = 1; e = {p} + {len(s)}")
                with self.block(f"elif n - {p} >= {_sure_mismatch(s)}:"):
                    self.line(f"t = 0; e = {p}")
                with self.block("else:"):
                    self.line(f"t, e, nd, iv = {self.closure(pid)}(ctx, {p})")
            case N.Space():
                self.line(f"e = {p}")
                self.space("e")
                self.line("t = 1")
            case N.Sequence(children=ch):
                self.sequence(pid, ch, p)
            case N.Choice(children=ch):
                self.choice(pid, ch, p)
            case N.Repetition(child=c, min_count=lo, max_count=hi):
                self.repetition(pid, c, lo, hi, p)
            case N.And(child=c):
                self.node(c, p)
                with self.block("if t == 2:"):  # as engine._compile_lookahead: ends at its start, not the input's end
                    self.line("ctx.observed.append(OTHER)")
                self.line(f"e = {p}")
            case N.Not(child=c):
                self.node(c, p)
                with self.block("if t == 2:"):
                    self.line("ctx.observed.append(OTHER)")
                self.line(f"t = (1, 0, 2)[t]; e = {p}")  # FAIL -> SUCCESS, SUCCESS -> FAIL, NEED_MORE stays
            case N.Any_():
                with self.block(f"if {p} < n and not '\\udc80' <= text[{p}] <= '\\udcff':"):
                    self.line(f"t = 1; e = {p} + 1")
                with self.block("else:"):
                    self.line(f"t, e, nd, iv = {self.closure(pid)}(ctx, {p})")
            case N.String() | N.Chars():
                decided, short = self.scan_fast_path(pid, p)
                with self.block(f"if {decided}:"):
                    self.line(f"t = 0 if {short} else 1" if short else "t = 1")
                with self.block("else:"):
                    self.line(f"t, e, nd, iv = {self.closure(pid)}(ctx, {p})")
            case N.Rule():
                self.line(f"t, e, nd, iv = {self.root(pid)}(ctx, {p})")
            case N.Tag(tag=tag, child=c):
                self.rule(c, p, "", tag)
            case N.Ref(name=name):
                rid = self.arena.rules.get(name)
                target = self.root(rid) if rid is not None else self.closure(pid)
                self.line(f"t, e, nd, iv = {target}(ctx, {p})")
            case N.Atomic(child=c):
                self.node(c, p)
                if self.may_nodes(c):
                    with self.block("if t == 2 and nd:"):
                        self.line(f"ctx.observed.append(({OBS_DROPPED}, {pid}, {p})); nd = _E")
            case N.Schema(child=c) | N.Gbnf(child=c) | N.Ac(child=c):
                self.node(c, p)
                self.set_empty(c, pid)
            case N.Until():  # no fast path: the closure scans with its precompiled regex
                self.line(f"t, e, nd, iv = {self.closure(pid)}(ctx, {p})")
            case _:
                assert_never(node)

    def space(self, var: str) -> None:
        """Advance position variable `var` over a run of spaces (engine._space, inline)."""
        with self.block(f"if {var} < n:"), self.block(f"if text[{var}] in {C_SPACE!r}:"):
            self.line(f"{var} = SPACE_MATCH(text, {var}).end()")
            with self.block(f"if {var} >= n:"):
                self.line("ctx.observed.append(OTHER)")
        with self.block("else:"):
            self.line("ctx.observed.append(OTHER)")

    # --- the regex fast path (peg/regular.py) --------------------------------------------------------------

    def regex_worth(self, pid: ParserId) -> Regular | None:
        """The regex form of `pid`'s subtree where trying it first pays (a leaf has a fast path of its own)."""
        if self.plain:
            return None
        reg = regular(self.arena, pid, self._regular)
        return reg if reg is not None and _pays(reg) else None

    def regex_match(self, reg: Regular, p: str) -> str:
        """The condition under which `reg` decides: it matches from `p`, ending at `e`, on text without escaped
        bytes, early enough that nothing it looked at was the end of the input."""
        rx = self.name(re.compile(reg.pattern).match, "RX")
        return f"not ctx.escapes and (m := {rx}(text, {p})) is not None and (e := m.end()) + {int(reg.reach)} <= n"

    @contextmanager
    def exact(self) -> Iterator[None]:
        """Emit the node-by-node code a fast path falls back to: no regex inside it (it would only repeat)."""
        self.plain += 1
        try:
            yield
        finally:
            self.plain -= 1

    def rule(self, child: ParserId, p: str, name: str, tag: str) -> None:
        self.line("ctx.depth += 1")
        with self.block("if ctx.depth > MAXD:"):
            self.line(f"raise TooDeep({p})")
        self.node(child, p)
        self.line("ctx.depth -= 1")
        with self.block("if t != 0:"):
            self.line("ast = ctx.ast; nid = len(ast)")
            kids = "nd" if self.may_nodes(child) else "_E"
            inv = "iv" if self.may_inv(child) else "_E"
            self.line(f"ast.append(NEW(AstNode, (nid, {name!r}, {tag!r}, {p}, e, text[{p}:e] if {p} < n else '', "
                      f"{kids}, t == 2, {inv})))")
            self.line("nd = (nid,)")
            if not self.may_inv(child):
                self.line("iv = _E")

    def sequence(self, pid: ParserId, children: tuple[ParserId, ...], p: str) -> None:
        k = self.fresh()
        pos, nodes, inv = f"p{k}", f"nodes{k}", f"inv{k}"
        keep_nodes, keep_inv = self.may_nodes(pid), self.may_inv(pid)
        self.line(f"{pos} = {p}")
        if keep_nodes:
            self.line(f"{nodes} = _E")
        if keep_inv:
            self.line(f"{inv} = _E")
        partial_exit = "; ".join(([f"nd = {nodes}"] if keep_nodes else []) + ([f"iv = {inv}"] if keep_inv else []))
        with self.block("while True:", loop=True):
            i = 0
            while i < len(children):
                found = self.regular_run(children, i)
                if found is not None:
                    run, reg = found
                    with self.block(f"if {self.regex_match(reg, pos)}:"):
                        self.line(f"{pos} = e")
                    with self.block("else:"), self.exact():
                        for c in run:
                            self.sequence_child(pid, c, pos, nodes, inv, partial_exit)
                    i += len(run)
                    continue
                self.sequence_child(pid, children[i], pos, nodes, inv, partial_exit)
                i += 1
            done = [f"t = 1; e = {pos}"] + ([f"nd = {nodes}"] if keep_nodes else []) + \
                ([f"iv = {inv}"] if keep_inv else [])
            self.line("; ".join(done))
            self.line("break")

    def regular_run(self, children: tuple[ParserId, ...], i: int) -> tuple[tuple[ParserId, ...], Regular] | None:
        """The longest run of regular children from `i` on and its regex, where trying that first pays."""
        if self.plain:
            return None
        parts: list[Regular] = []
        while i + len(parts) < len(children) and \
                (part := regular(self.arena, children[i + len(parts)], self._regular)) is not None:
            parts.append(part)
        if len(parts) < 2:
            return None  # (a lone child has its own fast path, in node())
        reg = concatenation(parts)
        return (children[i:i + len(parts)], reg) if _pays(reg) else None

    def sequence_child(self, pid: ParserId, c: ParserId, pos: str, nodes: str, inv: str, partial_exit: str) -> None:
        """One child of sequence `pid` at `pos`, inside its loop: on a failure or a partial result, `break`."""
        child = self.arena.parsers[c]
        if isinstance(child, N.Literal):
            # a match or a plain mismatch inline; near the end of the input (a partial match?) the closure decides
            with self.block(f"if text.startswith({child.literal!r}, {pos}):"):
                self.line(f"{pos} += {len(child.literal)}")
            with self.block(f"elif n - {pos} >= {_sure_mismatch(child.literal)}:"):
                self.line(f"t = 0; e = {pos}")
                self.line("break")
            with self.block("else:"):
                self.line(f"t, e, nd, iv = {self.closure(c)}(ctx, {pos})")
                if partial_exit:
                    self.line(partial_exit)
                self.line("break")
            return
        if isinstance(child, N.Space):
            self.space(pos)
            return
        if isinstance(child, N.Epsilon):
            return
        if isinstance(child, N.String | N.Chars):
            # the fast path advances the position; the closure decides the rest
            decided, short = self.scan_fast_path(c, pos)
            with self.block(f"if {decided}:"):
                if short:
                    with self.block(f"if {short}:"):
                        self.line("t = 0")
                        self.line("break")
                self.line(f"{pos} = e")
            with self.block("else:"):
                self.line(f"t, e, nd, iv = {self.closure(c)}(ctx, {pos})")
                with self.block("if t != 1:"):
                    if partial_exit:
                        self.line(partial_exit)
                    self.line("break")
                self.line(f"{pos} = e")
            return
        self.node(c, pos)
        if not self.never_fails(c):
            with self.block("if t == 0:"):
                self.line("break")
        self.accumulate(c, pid, nodes, inv)
        with self.block("if t == 2:"):
            if partial_exit:
                self.line(partial_exit)
            self.line("break")
        self.line(f"{pos} = e")

    def accumulate(self, child: ParserId, parent: ParserId, nodes: str, inv: str) -> None:
        """Append the child's node ids and invalid-byte records to the parent's, where either side has any."""
        if self.may_nodes(parent) and self.may_nodes(child):
            with self.block("if nd:"):
                self.line(f"{nodes} = {nodes} + nd if {nodes} else nd")
        if self.may_inv(parent) and self.may_inv(child):
            with self.block("if iv:"):
                self.line(f"{inv} = {inv} + iv if {inv} else iv")

    def choice(self, pid: ParserId, children: tuple[ParserId, ...], p: str) -> None:
        dispatch = dispatch_table(self.arena, self.firsts, children)
        allowed: list[frozenset[str] | None] = [None] * len(children)
        ch = ""
        if dispatch is not None:
            table, always = dispatch
            ch = f"c{self.fresh()}"
            for i in range(len(children)):
                if i not in always:
                    allowed[i] = frozenset(c for c, idx in table.items() if i in idx)
            # engine._compile_choice: alternatives that cannot start with the next character are skipped, and
            # the skip is off when the text holds escaped bytes (see first.py)
            self.line(f"{ch} = text[{p}] if {p} < n and not ctx.escapes else None")
        with self.block("while True:", loop=True):
            for i, c in enumerate(children):
                chars = allowed[i]
                if chars is not None:
                    members = self.name(chars, "CH") if len(chars) > 64 else "{" + ", ".join(
                        repr(x) for x in sorted(chars)) + "}"
                    header = f"if {ch} is None or {ch} in {members}:" if chars else f"if {ch} is None:"
                    with self.block(header):
                        self.alternative(pid, c, p)
                else:
                    self.alternative(pid, c, p)
            self.line(f"t = 0; e = {p}")
            self.line("break")

    def alternative(self, choice: ParserId, child: ParserId, p: str) -> None:
        self.node(child, p)
        with self.block("if t != 0:"):
            self.set_empty(child, choice)
            self.line("break")

    def optional(self, pid: ParserId, child: ParserId, p: str) -> None:
        # engine._compile_repetition with min 0, max 1, without the loop
        with self.block(f"if {p} >= n:"):
            self.line(f"ctx.observed.append(OTHER); t = 1; e = {p}")
            self.set_empty(child, pid, force=True)
        with self.block("else:"):
            self.node(child, p)
            # a failure or an empty success counts zero repetitions (and drops what the child made)
            cond = f"t == 1 and e == {p}" if self.never_fails(child) else f"t == 0 or (t == 1 and e == {p})"
            with self.block(f"if {cond}:"):
                self.line(f"t = 1; e = {p}")
                self.set_empty(child, pid, force=True)

    def repetition(self, pid: ParserId, child: ParserId, lo: int, hi: int, p: str) -> None:
        if lo == 0 and hi == 1:
            self.optional(pid, child, p)
            return
        k = self.fresh()
        pos, count, nodes, inv, partial = f"p{k}", f"k{k}", f"nodes{k}", f"inv{k}", f"r{k}"
        keep_nodes, keep_inv = self.may_nodes(pid), self.may_inv(pid)
        init = [f"{pos} = {p}", f"{count} = 0", f"{partial} = False"]
        if keep_nodes:
            init.append(f"{nodes} = _E")
        if keep_inv:
            init.append(f"{inv} = _E")
        self.line("; ".join(init))
        with self.block("while True:", loop=True):
            if hi != -1:
                with self.block(f"if {count} >= {hi}:"):
                    self.line("break")
            with self.block(f"if {pos} >= n:"):  # the child is never tried at the end of the input
                self.line("ctx.observed.append(OTHER)")
                self.line("break")
            self.node(child, pos)
            with self.block("if t == 0:"):
                self.line("break")
            with self.block(f"if t == 1 and e == {pos}:"):  # an empty match would loop forever
                self.line("break")
            self.accumulate(child, pid, nodes, inv)
            with self.block("if t == 2:"):
                self.line(f"{partial} = True; {pos} = e")
                self.line("break")
            self.line(f"{pos} = e; {count} += 1")
        tail = ([f"nd = {nodes}"] if keep_nodes else []) + ([f"iv = {inv}"] if keep_inv else [])
        with self.block(f"if {partial}:"):
            self.line("; ".join(["t = 2", f"e = {pos}", *tail]))
        if lo > 0:
            with self.block(f"elif {count} < {lo}:"):
                self.line(f"t = 2 if {pos} >= n and ctx.partial else 0; e = {pos}")
                if tail:
                    self.line("; ".join(tail))
        with self.block("else:"):
            self.line("; ".join(["t = 1", f"e = {pos}", *tail]))

    def scan_fast_path(self, pid: ParserId, p: str) -> tuple[str, str | None]:
        """Emit the regex run of a string body or character class from `p` into `e`. Returns the condition
        under which the closure's outcome is decided without it, and the condition (or None) under which that
        outcome is a FAIL at `e` rather than a SUCCESS ending at `e`.

        A string body (engine._compile_string) ends at its delimiter. A class run (engine._compile_chars) is
        decided when it reached its maximum or stopped before a character outside the class (not the end,
        not an escaped byte), and fails when shorter than its minimum.
        """
        node = self.arena.parsers[pid]
        if isinstance(node, N.String):
            body = self.name(string_body_regex(node.delimiter).match, "STR")
            self.line(f"e = {body}(text, {p}).end()")
            return f"e < n and text[e] == {node.delimiter!r}", None
        assert isinstance(node, N.Chars)
        lo, hi = node.min_count, node.max_count
        scan = self.name(class_run_regex(node).match, "CLS")
        self.line(f"e = {scan}(text, {p}).end()")
        decided = "e < n and not '\\udc80' <= text[e] <= '\\udcff'"
        if hi != -1:
            decided = f"e - {p} >= {hi} or ({decided})"
        return decided, (f"e - {p} < {lo}" if lo > 0 else None)


def compile_source(arena: Arena, entry: ParserId, closures: list[Fn] | None = None,
                   firsts: FirstSets | None = None) -> tuple[str, dict[str, Any]]:
    """The generated module text for evaluating `entry`, and the globals it runs in; the slow paths call
    `closures`, built by engine.compile_arena with `firsts` (both compiled here when not given)."""
    em = _Emitter(arena, closures, firsts)
    em.root(entry)
    done: set[ParserId] = set()
    chunks: list[str] = []
    while em.todo:
        pid = em.todo.pop()
        if pid in done:
            continue
        done.add(pid)
        em.lines = []
        em.function(pid)
        chunks.append("\n".join(em.lines))
    return "\n".join(chunks), em.globals


def compile_entry(arena: Arena, entry: ParserId, closures: list[Fn] | None = None,
                  firsts: FirstSets | None = None) -> Fn:
    """A function evaluating `entry` exactly like the closure of engine.compile_arena, only faster."""
    source, namespace = compile_source(arena, entry, closures, firsts)
    exec(compile(source, f"<peg arena {id(arena):#x} entry {entry}>", "exec"), namespace)
    fn: Fn = namespace[f"f{entry}"]
    return fn
