"""Evaluation of a PEG arena: SUCCESS / FAIL / NEED_MORE_INPUT as values, an AST, an optional trace.

Each node is compiled once into a closure `f(ctx, pos) -> (type, end, nodes, invalid)`; the arena caches the
closures. evaluate.py runs them, or the code codegen.py generates from the same arena, which calls these
closures wherever it has no fast path: they are the one statement of the semantics. Results are plain tuples
because they are created for every node visit (the hot path). Semantics follow llama.cpp's `parser_executor`
exactly (common/peg-parser.cpp), including its partial rules: where the input may continue, running out of it in
the middle of a literal, a delimiter or a lookahead gives NEED_MORE_INPUT, not FAIL. There is no memoisation, as
in the C++: results, AST node order and invalid-byte records stay identical to it.

Scans that the C++ does byte by byte (literals, `until`, string content, character classes, whitespace) use
str.startswith / str.find / compiled regular expressions here, falling back to an exact code-point walk only
where the text holds undecodable bytes (surrogate escapes), which the fast paths cannot classify.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, Any, assert_never

from autoparser.errors import GrammarError, ParseError
from autoparser.peg import nodes as N
from autoparser.peg.ast import Ast, AstId, AstNode
from autoparser.peg.first import FirstSets, dispatch_table
from autoparser.peg.nodes import C_SPACE, ParserId
from autoparser.peg.trie import NO_MATCH, Trie
from autoparser.peg.utf8 import ESCAPED_BYTE, ESCAPED_RANGE, INCOMPLETE, INVALID, SUCCESS, decode_at

if TYPE_CHECKING:
    from autoparser.peg.arena import Arena

# What evaluate.py, codegen.py (which must agree with the closures exactly), regular.py and resume.py share.
__all__ = [
    "CUT_ESCAPE",
    "FAIL_",
    "MAX_RULE_DEPTH",
    "NEED_MORE_",
    "OBSERVED_OTHER",
    "OBS_DROPPED",
    "OBS_LITERAL",
    "OBS_OTHER",
    "OBS_STRING",
    "OBS_UNTIL",
    "OBS_UNTIL_CUT",
    "SPACE_RUN",
    "SUCCESS_",
    "Ctx",
    "Fn",
    "Observation",
    "ParseResult",
    "Raw",
    "ResultType",
    "TooDeep",
    "TraceEvent",
    "class_regex",
    "class_run_regex",
    "compile_arena",
    "compile_node",
    "cut_delimiter_pattern",
    "has_escaped_bytes",
    "string_body_regex",
]

FAIL_, SUCCESS_, NEED_MORE_ = 0, 1, 2
_E: tuple[Any, ...] = ()

# Rule nesting is where recursion happens (json-value inside json-array inside ...). Past this depth the
# parse stops with a ParseError instead of exhausting the Python stack: real model output nests a few dozen
# levels at most, and adversarial input must not crash the server.
MAX_RULE_DEPTH = 1000

Raw = tuple[int, int, tuple[AstId, ...], tuple[tuple[int, int], ...]]

# Kinds of end-of-input observation (partial parses). A parse whose observations are all of the kinds below
# but OBS_OTHER can be extended when more input arrives without re-parsing (see resume.py): one open-ended scan
# (an `until` or a JSON string body) that ran into the end, a literal cut off by the end (`<tool_ca`), an `until`
# stopped before a delimiter cut off by the end. Any other decision taken at the end of the input (a
# repetition or a run of spaces stopped by the end, `end` matching, escaped bytes) forces a re-parse.
# OBS_DROPPED records no decision of its own: an `atomic` that ran into the end dropped the nodes it had made
# from where it starts (what the parse read there is in no node: the recovery's coverage needs to know).
OBS_OTHER, OBS_UNTIL, OBS_STRING, OBS_LITERAL, OBS_UNTIL_CUT, OBS_DROPPED = 0, 1, 2, 3, 4, 5
# (kind, parser id, position): where the scan started; where the cut-off literal or delimiter starts; where the
# atomic starts
Observation = tuple[int, int, int]
# the one observation of kind OBS_OTHER (it carries no position: it only forbids resuming)
OBSERVED_OTHER: Observation = (OBS_OTHER, -1, -1)
Fn = Callable[["Ctx", int], Raw]


class ResultType(IntEnum):
    FAIL = FAIL_
    SUCCESS = SUCCESS_
    NEED_MORE_INPUT = NEED_MORE_


@dataclass(frozen=True, slots=True)
class TraceEvent:
    depth: int
    parser: ParserId
    what: str
    start: int
    type: ResultType
    end: int


@dataclass(frozen=True)
class ParseResult:
    """Outcome of one parse: type, span, the top-level AST node ids, and the AST they live in.

    `observed` lists the decisions that depended on where the input ended (what makes resuming possible).
    """

    type: ResultType
    start: int
    end: int
    nodes: tuple[AstId, ...]
    invalid_utf8: tuple[tuple[int, int], ...]
    ast: Ast
    text: str
    trace: tuple[TraceEvent, ...] = field(default=(), repr=False)
    observed: tuple[Observation, ...] = field(default=(), repr=False)

    @property
    def success(self) -> bool:
        return self.type == ResultType.SUCCESS

    @property
    def fail(self) -> bool:
        return self.type == ResultType.FAIL

    @property
    def need_more_input(self) -> bool:
        return self.type == ResultType.NEED_MORE_INPUT

    def walk(self) -> list[AstNode]:
        return list(self.ast.walk(self.nodes))

    def tags(self) -> dict[str, str]:
        """tag -> raw text of the last visited node with that tag (pre-order), as `parse_and_extract`."""
        return {n.tag: n.text for n in self.ast.walk(self.nodes) if n.tag}

    def raise_for_failure(self, message: str = "input does not match the grammar") -> None:
        """Turn a FAIL into a ParseError with position and excerpt (the API edge of the engine)."""
        if self.fail:
            raise ParseError(message, text=self.text, position=self.end)


class TooDeep(Exception):
    """Rule nesting passed MAX_RULE_DEPTH at `pos`: raised by the closures and the generated code alike, and
    turned into a ParseError by whoever runs them (evaluate.run; the codegen check compares it)."""

    def __init__(self, pos: int) -> None:
        self.pos = pos


def has_escaped_bytes(text: str) -> bool:
    # isascii() and a strict encode are C-speed; only text that fails both is searched for escapes.
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return ESCAPED_BYTE.search(text) is not None
    return False


class Ctx:
    __slots__ = ("ast", "depth", "escapes", "n", "observed", "partial", "text", "trace")

    def __init__(self, text: str, partial: bool) -> None:
        self.text = text
        self.n = len(text)
        self.partial = partial
        self.ast: list[AstNode] = []
        self.depth = 0
        self.trace: list[TraceEvent] | None = None
        # Every decision that depended on where the input ends (see Observation); rare, so cheap to record.
        self.observed: list[Observation] = []
        # whether the input holds undecodable bytes at all: decides fast scans vs the exact C++ walk
        self.escapes = has_escaped_bytes(text)


# --- node compilers -------------------------------------------------------------------------------------------

SPACE_RUN = re.compile(f"[{C_SPACE}]*")


def class_regex(node: N.Chars) -> re.Pattern[str]:
    """A regex for one code point of the class, never matching a surrogate escape (those stop the scan)."""
    parts = []
    for r in node.ranges:
        lo, hi = r.start, r.end
        if hi < lo:
            continue
        parts.append(re.escape(chr(lo)) if lo == hi else f"{re.escape(chr(lo))}-{re.escape(chr(hi))}")
    body = "".join(parts)
    if node.negated:
        return re.compile(f"[^{body}{ESCAPED_RANGE}]")
    if not body:
        return re.compile("(?!)")
    return re.compile(f"(?![{ESCAPED_RANGE}])[{body}]")


def _compile_literal(s: str, pid: ParserId) -> Fn:
    length = len(s)

    def literal(ctx: Ctx, pos: int) -> Raw:
        text = ctx.text
        if text.startswith(s, pos):
            return SUCCESS_, pos + length, _E, _E
        remaining = ctx.n - pos
        if remaining < length and s.startswith(text[pos:]):
            # The input ran out inside the literal.
            if ctx.partial:
                ctx.observed.append((OBS_LITERAL, pid, pos))
                return NEED_MORE_, ctx.n, _E, _E
            ctx.observed.append(OBSERVED_OTHER)
        elif (ctx.partial and ctx.escapes and remaining < 4 * length and "\udc80" <= text[-1] <= "\udcff"
              and _cut_inside_literal(s, text[pos:])):
            ctx.observed.append(OBSERVED_OTHER)
            return NEED_MORE_, ctx.n, _E, _E
        return FAIL_, pos, _E, _E

    return literal


def _cut_inside_literal(s: str, tail: str) -> bool:
    """Whether `tail`, which ends in escaped bytes, is a proper byte prefix of `s`.

    The C++ compares literals byte by byte, so input cut inside a multi-byte character of the literal (the
    bytes so far arrive here as surrogate escapes) is a partial match, not a mismatch.
    """
    try:
        got, want = tail.encode("utf-8", "surrogateescape"), s.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return False
    return len(got) < len(want) and want.startswith(got)


def _compile_sequence(fns: list[Fn], children: tuple[ParserId, ...]) -> Fn:
    kids = children

    def sequence(ctx: Ctx, pos: int) -> Raw:
        p = pos
        nodes: tuple[AstId, ...] = _E
        inv: tuple[tuple[int, int], ...] = _E
        for cid in kids:
            t, e, nd, iv = fns[cid](ctx, p)
            if t == FAIL_:
                return FAIL_, e, _E, _E
            if nd:
                nodes = nodes + nd if nodes else nd
            if iv:
                inv = inv + iv if inv else iv
            if t == NEED_MORE_:
                return NEED_MORE_, e, nodes, inv
            p = e
        return SUCCESS_, p, nodes, inv

    return sequence


def _compile_choice(fns: list[Fn], children: tuple[ParserId, ...],
                    dispatch: tuple[dict[str, tuple[int, ...]], tuple[int, ...]] | None = None) -> Fn:
    kids = children
    if dispatch is None:
        def choice(ctx: Ctx, pos: int) -> Raw:
            for cid in kids:
                r = fns[cid](ctx, pos)
                if r[0] != FAIL_:
                    return r
            return FAIL_, pos, _E, _E

        return choice

    table, always = dispatch
    by_char = {ch: tuple(kids[i] for i in idx) for ch, idx in table.items()}
    others = tuple(kids[i] for i in always)

    def choice_dispatch(ctx: Ctx, pos: int) -> Raw:
        # Alternatives that cannot start with the next character are skipped (exact: see first.py).
        if pos < ctx.n and not ctx.escapes:
            candidates = by_char.get(ctx.text[pos], others)
        else:
            candidates = kids
        for cid in candidates:
            r = fns[cid](ctx, pos)
            if r[0] != FAIL_:
                return r
        return FAIL_, pos, _E, _E

    return choice_dispatch


def _compile_repetition(fns: list[Fn], child: ParserId, lo: int, hi: int) -> Fn:
    def repetition(ctx: Ctx, pos: int) -> Raw:
        f = fns[child]
        p = pos
        count = 0
        nodes: tuple[AstId, ...] = _E
        inv: tuple[tuple[int, int], ...] = _E
        n = ctx.n
        while hi == -1 or count < hi:
            if p >= n:  # the child is never tried at the end of the input
                ctx.observed.append(OBSERVED_OTHER)
                break
            t, e, nd, iv = f(ctx, p)
            if t == FAIL_ or (t == SUCCESS_ and e == p):  # (an empty match would loop forever)
                break
            # a match, or one the end of the input cut short: either way the repetition keeps what it read
            if nd:
                nodes = nodes + nd if nodes else nd
            if iv:
                inv = inv + iv if inv else iv
            if t == NEED_MORE_:
                return NEED_MORE_, e, nodes, inv
            p = e
            count += 1
        if lo > 0 and count < lo:
            if p >= n and ctx.partial:
                return NEED_MORE_, p, nodes, inv
            return FAIL_, p, _E, _E
        return SUCCESS_, p, nodes, inv

    return repetition


# A lookahead (And: peek, Not: negate) runs its child and consumes nothing; the two differ only in what they
# return for each status of the child, indexed by FAIL_, SUCCESS_, NEED_MORE_: peek passes it on, negate swaps
# failure and success. A predicate's NEED_MORE_INPUT ends where the predicate started, not at the end of the
# input: a parse it ends cannot be extended by lengthening its open nodes (resume.py), so it is recorded as a
# decision of its own.
_PEEK = (FAIL_, SUCCESS_, NEED_MORE_)
_NEGATE = (SUCCESS_, FAIL_, NEED_MORE_)


def _compile_lookahead(fns: list[Fn], child: ParserId, outcome: tuple[int, int, int]) -> Fn:
    def lookahead(ctx: Ctx, pos: int) -> Raw:
        t = fns[child](ctx, pos)[0]
        if t == NEED_MORE_:
            ctx.observed.append(OBSERVED_OTHER)
        return outcome[t], pos, _E, _E

    return lookahead


def _any(ctx: Ctx, pos: int) -> Raw:
    if pos < ctx.n:
        c = ctx.text[pos]
        if not "\udc80" <= c <= "\udcff":
            return SUCCESS_, pos + 1, _E, _E
    ctx.observed.append(OBSERVED_OTHER)  # the end, or an escaped byte (whose decoding may depend on what follows)
    status, _cp, length = decode_at(ctx.text, pos)
    if status == INCOMPLETE:
        return (NEED_MORE_ if ctx.partial else FAIL_), pos, _E, _E
    if status == INVALID:
        return FAIL_, pos, _E, _E
    return SUCCESS_, pos + length, _E, _E


def _space(ctx: Ctx, pos: int) -> Raw:
    if pos >= ctx.n:
        ctx.observed.append(OBSERVED_OTHER)
        return SUCCESS_, pos, _E, _E
    if ctx.text[pos] not in C_SPACE:
        return SUCCESS_, pos, _E, _E
    m = SPACE_RUN.match(ctx.text, pos)
    end = m.end() if m else pos
    if end >= ctx.n:
        ctx.observed.append(OBSERVED_OTHER)
    return SUCCESS_, end, _E, _E


def class_run_regex(node: N.Chars) -> re.Pattern[str]:
    """Up to max_count code points of the class, stopping at any escaped byte (the walk below goes on)."""
    quant = f"{{0,{node.max_count}}}" if node.max_count >= 0 else "*"
    return re.compile(f"(?:{class_regex(node).pattern}){quant}")


def _compile_chars(node: N.Chars) -> Fn:
    lo, hi = node.min_count, node.max_count
    scan = class_run_regex(node)
    ranges = node.ranges
    negated = node.negated

    def member(cp: int) -> bool:
        hit = any(r.start <= cp <= r.end for r in ranges)
        return hit != negated

    def chars(ctx: Ctx, pos: int) -> Raw:
        text, n = ctx.text, ctx.n
        m = scan.match(text, pos)
        p = m.end() if m else pos
        count = p - pos
        # Exact walk past escaped bytes, which the regex stops at (the C++ may still decode a few of them).
        while (hi == -1 or count < hi) and p < n and "\udc80" <= text[p] <= "\udcff":
            status, cp, length = decode_at(text, p)
            if status == INVALID:
                return (SUCCESS_, p, _E, _E) if count >= lo else (FAIL_, pos, _E, _E)
            if status == INCOMPLETE:
                break
            if not member(cp):
                break
            p += length
            count += 1
            m2 = scan.match(text, p)
            if m2 and m2.end() > p:
                extra = m2.end() - p
                if hi != -1:
                    extra = min(extra, hi - count)
                p += extra
                count += extra
        if hi != -1 and count >= hi:
            return SUCCESS_, p, _E, _E
        if p >= n:
            ctx.observed.append(OBSERVED_OTHER)
            status = INCOMPLETE
        elif "\udc80" <= text[p] <= "\udcff":
            status = decode_at(text, p)[0]
        else:
            status = SUCCESS  # a character outside the class
        if status == INCOMPLETE:
            if count >= lo:
                return SUCCESS_, p, _E, _E
            return (NEED_MORE_, p, _E, _E) if ctx.partial else (FAIL_, pos, _E, _E)
        if status == INVALID:
            return (SUCCESS_, p, _E, _E) if count >= lo else (FAIL_, pos, _E, _E)
        if count < lo:
            return FAIL_, p, _E, _E
        return SUCCESS_, p, _E, _E

    return chars


_HEXDIGITS = frozenset("0123456789abcdefABCDEF")


def string_body_regex(delim: str) -> re.Pattern[str]:
    """The longest run of complete characters and escapes (no delimiter, no escaped byte) from a position.

    Tokens of a string body start either with a plain character or a backslash, so the walk below reaches the
    end of this run in the same state: a string that ends there ends where the walk would end it.
    """
    plain = "[^" + re.escape(delim) + "\\\\" + ESCAPED_RANGE + "]*"
    escape = "\\\\(?:[" + re.escape(delim + "\\/bfnrt") + "]|u[0-9a-fA-F]{4})"
    return re.compile(f"{plain}(?:{escape}{plain})*")


# An escape cut off by the end of the text (`\`, `\u`, `\u12`): the walk below stops before it with
# NEED_MORE_INPUT, as it stops at the end of the text without it (resume.py relies on that)
CUT_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{0,3})?\Z")


def _compile_string(delim: str, pid: ParserId) -> Fn:
    plain = re.compile("[^" + re.escape(delim) + "\\\\" + ESCAPED_RANGE + "]*")
    body = string_body_regex(delim)
    simple_escapes = frozenset(delim + "\\/bfnrt")

    def string(ctx: Ctx, pos: int) -> Raw:
        text, n, partial = ctx.text, ctx.n, ctx.partial
        run = body.match(text, pos)  # complete tokens in one C call; the walk goes on from there
        p = run.end() if run else pos
        while True:
            m = plain.match(text, p)
            if m:
                p = m.end()
            if p >= n:
                ctx.observed.append((OBS_STRING, pid, pos))
                return (NEED_MORE_ if partial else FAIL_), p, _E, _E
            c = text[p]
            if c == delim:
                return SUCCESS_, p, _E, _E
            if c == "\\":
                if p + 1 >= n:
                    # a lone backslash at the end: do not count it until the escape is complete
                    ctx.observed.append(OBSERVED_OTHER)
                    return (NEED_MORE_, p, _E, _E) if partial else (FAIL_, pos, _E, _E)
                e = text[p + 1]
                if e in simple_escapes:
                    p += 2
                    continue
                if e == "u":
                    q = p + 2
                    for _ in range(4):
                        if q >= n:
                            ctx.observed.append(OBSERVED_OTHER)
                            return (NEED_MORE_, p, _E, _E) if partial else (FAIL_, pos, _E, _E)
                        if text[q] not in _HEXDIGITS:
                            return FAIL_, pos, _E, _E
                        q += 1
                    p = q
                    continue
                return FAIL_, pos, _E, _E
            # an escaped (undecodable) byte
            ctx.observed.append(OBSERVED_OTHER)
            status, _cp, length = decode_at(text, p)
            if status == INCOMPLETE:
                return (NEED_MORE_, p, _E, _E) if partial else (FAIL_, pos, _E, _E)
            if status == INVALID:
                return FAIL_, pos, _E, _E
            p += length

    return string


def cut_delimiter_pattern(delimiters: Iterable[str]) -> str:
    """Regex source matching a proper prefix of one of `delimiters` that ends the text (a delimiter cut off by
    the end of the input), or "" when there is none (one-character delimiters)."""
    prefixes = sorted({d[:k] for d in delimiters for k in range(1, len(d))}, key=len, reverse=True)
    return "(?:" + "|".join(re.escape(p) for p in prefixes) + ")\\Z" if prefixes else ""


def _compile_until(delimiters: tuple[str, ...], pid: ParserId) -> Fn:
    trie = Trie(list(delimiters))
    usable = sorted({d for d in delimiters if d}, key=len)
    finder = re.compile("|".join(re.escape(d) for d in usable)) if usable else None
    longest = max((len(d) for d in usable), default=0)
    cut_source = cut_delimiter_pattern(usable)
    cut = re.compile(cut_source) if cut_source else None

    def slow(ctx: Ctx, pos: int) -> Raw:
        # Exact port of the C++ walk, used when the text holds escaped bytes.
        text, n, partial = ctx.text, ctx.n, ctx.partial
        ctx.observed.append(OBSERVED_OTHER)  # conservative: texts with escaped bytes are never resumed
        p = last_valid = pos
        invalid: list[tuple[int, int]] = []
        while p < n:
            status, _cp, length = decode_at(text, p)
            if status == INCOMPLETE and partial:
                return NEED_MORE_, last_valid, _E, tuple(invalid)
            if status != SUCCESS:
                invalid.append((p, length))
                p += length
                last_valid = p
                continue
            if trie.check_at(text, p) != NO_MATCH:
                return SUCCESS_, p, _E, tuple(invalid)
            p += length
            last_valid = p
        if last_valid == n and partial:
            return NEED_MORE_, last_valid, _E, tuple(invalid)
        return SUCCESS_, last_valid, _E, tuple(invalid)

    def until(ctx: Ctx, pos: int) -> Raw:
        text, n = ctx.text, ctx.n
        m = finder.search(text, pos) if finder is not None else None
        stop = m.start() if m else n
        if ctx.escapes and ESCAPED_BYTE.search(text, pos, stop if stop == n else stop + longest):
            return slow(ctx, pos)
        # A delimiter cut off by the end of the input also ends the match, before it, in both modes. (The
        # C++ tries each position from the end minus the longest delimiter; the leftmost match is its first.)
        if cut is not None and stop > n - longest + 1:
            c = cut.search(text, max(pos, n - longest + 1))
            if c is not None and c.start() < stop:
                ctx.observed.append((OBS_UNTIL_CUT, pid, c.start()) if ctx.partial else OBSERVED_OTHER)
                return SUCCESS_, c.start(), _E, _E
        if m:
            return SUCCESS_, stop, _E, _E
        ctx.observed.append((OBS_UNTIL, pid, pos) if ctx.partial else OBSERVED_OTHER)
        return (NEED_MORE_ if ctx.partial else SUCCESS_), n, _E, _E

    return until


# AstNode(...) goes through the NamedTuple's Python-level __new__; building the tuple directly skips that frame
# (one node per matched rule or tag: 7-14% of a tool-call parse, measured A/B in one process).
_new_node = tuple.__new__


def _compile_rule(fns: list[Fn], child: ParserId, name: str, tag: str) -> Fn:
    def rule(ctx: Ctx, pos: int) -> Raw:
        ctx.depth += 1
        if ctx.depth > MAX_RULE_DEPTH:
            raise TooDeep(pos)
        t, e, nd, iv = fns[child](ctx, pos)
        ctx.depth -= 1
        if t == FAIL_:
            return t, e, nd, iv
        ast = ctx.ast
        nid = len(ast)
        ast.append(_new_node(AstNode, (nid, name, tag, pos, e, ctx.text[pos:e] if pos < ctx.n else "", nd,
                                       t == NEED_MORE_, iv)))
        return t, e, (nid,), iv

    return rule


def _compile_atomic(fns: list[Fn], child: ParserId, pid: ParserId) -> Fn:
    def atomic(ctx: Ctx, pos: int) -> Raw:
        r = fns[child](ctx, pos)
        if r[0] == NEED_MORE_ and r[2]:
            ctx.observed.append((OBS_DROPPED, pid, pos))
            return NEED_MORE_, r[1], _E, r[3]
        return r

    return atomic


def _compile_ref(fns: list[Fn], arena: Arena, name: str) -> Fn:
    rid = arena.rules.get(name)
    if rid is None:
        def missing(ctx: Ctx, pos: int) -> Raw:
            raise GrammarError(f"Rule not found: {name}")

        return missing

    def ref(ctx: Ctx, pos: int) -> Raw:
        return fns[rid](ctx, pos)

    return ref


def _compile_delegate(fns: list[Fn], child: ParserId) -> Fn:
    def delegate(ctx: Ctx, pos: int) -> Raw:
        return fns[child](ctx, pos)

    return delegate


def _ok(ctx: Ctx, pos: int) -> Raw:
    return SUCCESS_, pos, _E, _E


def _start(ctx: Ctx, pos: int) -> Raw:
    return (SUCCESS_ if pos == 0 else FAIL_), pos, _E, _E


def _end(ctx: Ctx, pos: int) -> Raw:
    if pos >= ctx.n:
        ctx.observed.append(OBSERVED_OTHER)
        return SUCCESS_, pos, _E, _E
    return FAIL_, pos, _E, _E


def compile_node(arena: Arena, fns: list[Fn], pid: ParserId, firsts: FirstSets | None = None) -> Fn:
    node = arena.parsers[pid]
    match node:
        case N.Epsilon():
            return _ok
        case N.Start():
            return _start
        case N.End():
            return _end
        case N.Literal(literal=s):
            return _compile_literal(s, pid)
        case N.Sequence(children=ch):
            return _compile_sequence(fns, ch)
        case N.Choice(children=ch):
            return _compile_choice(fns, ch, dispatch_table(arena, firsts, ch) if firsts is not None else None)
        case N.Repetition(child=c, min_count=lo, max_count=hi):
            return _compile_repetition(fns, c, lo, hi)
        case N.And(child=c):
            return _compile_lookahead(fns, c, _PEEK)
        case N.Not(child=c):
            return _compile_lookahead(fns, c, _NEGATE)
        case N.Any_():
            return _any
        case N.Space():
            return _space
        case N.Chars():
            return _compile_chars(node)
        case N.String(delimiter=d):
            return _compile_string(d, pid)
        case N.Until(delimiters=ds):
            return _compile_until(ds, pid)
        case N.Rule(name=name, child=c):
            return _compile_rule(fns, c, name, "")
        case N.Tag(tag=t, child=c):
            return _compile_rule(fns, c, "", t)
        case N.Ref(name=name):
            return _compile_ref(fns, arena, name)
        case N.Atomic(child=c):
            return _compile_atomic(fns, c, pid)
        case N.Schema(child=c) | N.Gbnf(child=c) | N.Ac(child=c):
            return _compile_delegate(fns, c)
    assert_never(node)


def _traced(arena: Arena, pid: ParserId, inner: Fn) -> Fn:
    what = arena.dump(pid)

    def traced(ctx: Ctx, pos: int) -> Raw:
        log = ctx.trace
        depth = ctx.depth
        r = inner(ctx, pos)
        if log is not None:
            log.append(TraceEvent(depth, pid, what, pos, ResultType(r[0]), r[1]))
        return r

    return traced


def compile_arena(arena: Arena, trace: bool = False, firsts: FirstSets | None = None) -> list[Fn]:
    """One closure per node of `arena`; choices dispatch on `firsts` (computed here when not given; codegen.py
    takes the same ones, so that its choices skip exactly the alternatives the closures skip)."""
    fns: list[Fn] = []
    firsts = firsts if firsts is not None else FirstSets(arena)
    for pid in range(len(arena.parsers)):
        f = compile_node(arena, fns, pid, firsts)
        fns.append(_traced(arena, pid, f) if trace else f)
    return fns
