"""Property tests of the PEG engine over random grammars and random (grammar-biased) inputs.

A grammar is drawn as a small spec tree over the builder combinators, then built into an arena. Inputs are
either derived from the spec (so that full matches are common) and then possibly mutated, or assembled from the
grammar's own literals and a few JSON/markup characters.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from peg_specs import Spec, build

from autoparser.errors import AutoparserError
from autoparser.peg import Arena, Builder, ParseResult, ResultType, build_peg_parser, load, save
from autoparser.peg import nodes as N
from autoparser.peg.engine import MAX_RULE_DEPTH
from autoparser.peg.trie import NO_MATCH, Trie
from autoparser.peg.utf8 import INCOMPLETE, INVALID, decode_at
from autoparser.peg.utf8 import SUCCESS as UTF8_OK
from autoparser.testing.codegen import CodegenCheck

SETTINGS = settings(max_examples=300, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])



@pytest.fixture(scope="module", autouse=True)
def _engine_stack() -> None:
    # The first parse raises the interpreter's recursion limit (evaluate.run); do it before Hypothesis runs,
    # which warns when a test body changes that limit.
    build_peg_parser(lambda p: p.eps()).parse("")

LITERALS = ["a", "b", "ab", "ba", "<t>", "</t>", "é", "世", '"', "x", "", "\n"]
CLASSES = {  # class -> characters that belong to it (for deriving matching text)
    "[a-b]": "ab",
    "[^a]": "bx<é世",
    "[a-z<>/]": "abt<>/",
    r"[\u4E00-\u9FFF]": "世界",
    "[0-9]": "0123456789",
}
COUNTS = [(1, -1), (0, -1), (1, 1), (0, 1), (2, 3)]
REPEATS = [(0, 1), (0, -1), (1, -1), (2, 2), (1, 3)]
DELIMITERS = ["</t>", "b", "ab", ">", '"']
FILLER = ["a", "b", "x", "t", "<", ">", "/", " ", "\n", "é", "世", "😀", '"', "\\", "'", "1", "{", "}", "[",
          "]", ":", ","]
JSON_BITS = ["true", "null", "1", "-2.5e3", '"s"', '{"a": 1}', "[1, 2]", "{", "[", '"', "\\u00", ","]


# --- grammar specs -----------------------------------------------------------------------------------------------

def _leaves(with_ref: bool) -> st.SearchStrategy[Spec]:
    options: list[st.SearchStrategy[Spec]] = [
        st.builds(lambda s: ("lit", s), st.sampled_from(LITERALS)),
        st.builds(lambda c, n: ("chars", c, *n), st.sampled_from(sorted(CLASSES)), st.sampled_from(COUNTS)),
        st.just(("any",)),
        st.just(("space",)),
        st.just(("eps",)),
        st.builds(lambda ds: ("until", tuple(ds)), st.lists(st.sampled_from(DELIMITERS), min_size=1, max_size=2,
                                                          unique=True)),
        st.just(("rest",)),
        # text up to a marker, then the marker: how the chat builders delimit content, reasoning and values
        # (also where the text may stop before other markers, one sharing a prefix with it)
        st.builds(lambda ds: ("upto", ds), st.sampled_from([("</t>",), ("ab",), ("</t>", "</b>"), ("ab", '"')])),
        st.builds(lambda q: ("str", q), st.sampled_from(['"', "'"])),
        st.just(("json",)),
    ]
    if with_ref:
        options.append(st.just(("ref",)))
    return st.one_of(options)


def _specs(with_ref: bool) -> st.SearchStrategy[Spec]:
    def extend(children: st.SearchStrategy[Spec]) -> st.SearchStrategy[Spec]:
        return st.one_of(
            st.builds(lambda cs: ("seq", tuple(cs)), st.lists(children, min_size=2, max_size=4)),
            st.builds(lambda cs: ("choice", tuple(cs)), st.lists(children, min_size=2, max_size=3)),
            st.builds(lambda c, n: ("rep", c, *n), children, st.sampled_from(REPEATS)),
            st.builds(lambda c: ("peek", c), children),
            st.builds(lambda c: ("not", c), children),
            st.builds(lambda t, c: ("tag", t, c), st.sampled_from(["t1", "t2"]), children),
            st.builds(lambda c: ("atomic", c), children),
            st.builds(lambda t, c: ("rule", t, c), st.sampled_from(["n1", "n2"]), children),
        )

    return st.recursive(_leaves(with_ref), extend, max_leaves=8)


@dataclass(frozen=True)
class Grammar:
    rule_body: Spec  # body of the recursive rule "r" (may refer to itself)
    root: Spec       # may refer to "r"

    def build(self) -> tuple[Arena, int, int]:
        """(arena whose root is `root + end()`, id of `root`, id of the root sequence)."""
        b = Builder()
        b.rule("r", lambda: build(b, self.rule_body))
        g = build(b, self.root)
        whole = g + b.end()
        return b.build(whole), g.id, whole.id




def _delimiters(spec: Spec) -> set[str]:
    """Every `until` delimiter in a spec."""
    if spec[0] == "until":
        return set(spec[1])
    if spec[0] == "upto":
        return set(spec[1])
    found: set[str] = set()
    for part in spec[1:]:
        if isinstance(part, tuple) and part and isinstance(part[0], str):
            found |= _delimiters(part)
        elif isinstance(part, tuple):
            for c in part:
                if isinstance(c, tuple):
                    found |= _delimiters(c)
    return found


grammars = st.builds(Grammar, _specs(with_ref=True), _specs(with_ref=True))


# --- inputs ------------------------------------------------------------------------------------------------------

@st.composite
def _derive(draw: st.DrawFn, spec: Spec, body: Spec, depth: int = 0) -> str:
    """Text the spec is likely to match (lookaheads and recursion are approximated)."""
    kind = spec[0]
    if kind == "lit":
        return str(spec[1])
    if kind == "chars":
        lo, hi = spec[2], spec[3]
        n = draw(st.integers(lo, hi if hi >= 0 else lo + 3))
        return "".join(draw(st.sampled_from(CLASSES[spec[1]])) for _ in range(n))
    if kind == "any":
        return draw(st.sampled_from(FILLER))
    if kind == "space":
        return draw(st.sampled_from(["", " ", "\n "]))
    if kind in ("eps", "peek", "not"):
        return ""
    if kind in ("until", "rest"):
        return "".join(draw(st.lists(st.sampled_from(FILLER), max_size=4)))
    if kind == "upto":  # the marker, or another delimiter (which stops the text but fails the literal)
        return "".join(draw(st.lists(st.sampled_from(FILLER), max_size=4))) + draw(st.sampled_from(spec[1]))
    if kind == "str":
        quote: str = spec[1]
        inner = draw(st.lists(st.sampled_from(["a", "é", "\\n", "\\u0041", "\\" + quote, "x y"]), max_size=3))
        return quote + "".join(inner) + quote
    if kind == "json":
        return json.dumps(draw(st.recursive(st.none() | st.booleans() | st.integers(-5, 50) | st.text("aé\"\\", max_size=3),
                                            lambda c: st.lists(c, max_size=2) | st.dictionaries(st.text("ab", max_size=2), c, max_size=2),
                                            max_leaves=4)))
    if kind == "ref":
        if depth > 3:
            return ""
        return draw(_derive(body, body, depth + 1))
    if kind == "seq":
        return "".join(draw(_derive(c, body, depth)) for c in spec[1])
    if kind == "choice":
        return draw(_derive(draw(st.sampled_from(spec[1])), body, depth))
    if kind == "rep":
        lo, hi = spec[2], spec[3]
        n = draw(st.integers(lo, hi if hi >= 0 else lo + 2))
        return "".join(draw(_derive(spec[1], body, depth)) for _ in range(n))
    if kind in ("tag", "rule"):
        return draw(_derive(spec[2], body, depth))
    if kind == "atomic":
        return draw(_derive(spec[1], body, depth))
    raise AssertionError(kind)


@st.composite
def grammar_and_input(draw: st.DrawFn) -> tuple[Grammar, str]:
    g = draw(grammars)
    how = draw(st.integers(0, 3))
    if how <= 1:
        text = draw(_derive(g.root, g.rule_body))
        if how == 1 and text:  # mutate: drop, duplicate or insert one character
            i = draw(st.integers(0, len(text) - 1))
            text = draw(st.sampled_from([text[:i] + text[i + 1:], text[:i] + text[i] + text[i:],
                                         text[:i] + draw(st.sampled_from(FILLER)) + text[i:]]))
    else:
        pool = LITERALS + FILLER + JSON_BITS + sorted(_delimiters(g.root) | _delimiters(g.rule_body))
        text = "".join(draw(st.lists(st.sampled_from(pool), max_size=8)))
    return g, text[:40]


# --- helpers -----------------------------------------------------------------------------------------------------

def _outcome(arena: Arena, text: str | bytes, *, partial: bool, parser: int | None = None) -> ParseResult | None:
    """The parse result, or None when the engine gave up with a clean autoparser error (too deep, ...)."""
    try:
        return arena.parse(text, partial=partial, parser=parser)
    except AutoparserError:
        return None


def _fingerprint(r: ParseResult | None) -> Any:
    if r is None:
        return None
    return (r.type, r.start, r.end, r.invalid_utf8,
            [(n.rule, n.tag, n.start, n.end, n.text, n.is_partial, n.invalid_utf8) for n in r.walk()])


def _ends_inside_delimiter(prefix: str, delimiters: set[str]) -> bool:
    """Whether the text ends with a non-empty proper prefix of one of the delimiters."""
    return any(prefix.endswith(d[:k]) for d in delimiters for k in range(1, len(d)))


# --- property 1: streaming never contradicts the whole ----------------------------------------------------------

@SETTINGS
@given(grammar_and_input())
def test_partial_prefix_never_fails_when_whole_succeeds(case: tuple[Grammar, str]) -> None:
    """If `G + end()` parses the whole input strictly, no prefix parsed as partial input is FAIL.

    One exception is part of the C++ semantics, not a bug: `until` treats a delimiter cut off by the end of
    the input as found, in partial mode too, and stops before it. The rest of the grammar then sees the
    would-be delimiter as text, and `end()` (which never asks for more input) rejects it: with
    G = until("ab") the whole "xac" succeeds, but its prefix "xa" fails. So the statement that holds is:
    every prefix that does not end inside one of the grammar's `until` delimiters is not FAIL.
    """
    g, text = case
    arena, _, _ = g.build()
    whole = _outcome(arena, text, partial=False)
    if whole is None or not whole.success:
        return
    delimiters = _delimiters(g.root) | _delimiters(g.rule_body)
    for k in range(len(text) + 1):
        prefix = text[:k]
        r = _outcome(arena, prefix, partial=True)
        if r is None:
            continue
        if r.fail:
            assert _ends_inside_delimiter(prefix, delimiters), (
                f"prefix {prefix!r} of {text!r} fails as partial input although the whole succeeds\n{arena}")


@SETTINGS
@given(grammar_and_input())
def test_partial_whole_agrees_with_strict_success(case: tuple[Grammar, str]) -> None:
    """A complete match of `G + end()` is never a FAIL in partial mode either (it may ask for more)."""
    g, text = case
    arena, _, _ = g.build()
    strict = _outcome(arena, text, partial=False)
    partial_result = _outcome(arena, text, partial=True)
    if strict is None or partial_result is None or not strict.success:
        return
    assert not partial_result.fail


# --- property 2: chunking does not matter -----------------------------------------------------------------------

@SETTINGS
@given(grammar_and_input(), st.lists(st.integers(0, 40), max_size=6), st.booleans())
def test_any_chunking_gives_the_whole_result(case: tuple[Grammar, str], cuts: list[int], as_bytes: bool) -> None:
    """Feeding the input chunk by chunk (partial parses of the growing text, strict parse at the end) ends
    with exactly the result of one parse of the whole on a fresh arena. Byte chunks may split characters."""
    g, text = case
    data: str | bytes = text.encode("utf-8") if as_bytes else text
    arena, _, _ = g.build()
    bounds = sorted({min(c, len(data)) for c in cuts} | {len(data)})
    last: ParseResult | None = None
    for i, bound in enumerate(bounds):
        final = i == len(bounds) - 1
        last = _outcome(arena, data[:bound], partial=not final)
    fresh, _, _ = g.build()
    assert _fingerprint(last) == _fingerprint(_outcome(fresh, text, partial=False))


@SETTINGS
@given(grammar_and_input())
def test_results_are_deterministic_and_survive_serialisation(case: tuple[Grammar, str]) -> None:
    g, text = case
    arena, gid, _ = g.build()
    loaded = load(save(arena))
    for partial in (False, True):
        first = _fingerprint(_outcome(arena, text, partial=partial))
        assert _fingerprint(_outcome(arena, text, partial=partial)) == first
        assert _fingerprint(_outcome(loaded, text, partial=partial)) == first
        assert _fingerprint(_outcome(loaded, text, partial=partial, parser=gid)) == \
            _fingerprint(_outcome(arena, text, partial=partial, parser=gid))


# --- property 3: only autoparser errors escape ------------------------------------------------------------------

@SETTINGS
@given(grammars, st.text(alphabet="ab<>/t\"\\'{}[]:,1é世😀 \n\udcff\udc80\udce4", max_size=30), st.booleans(),
       st.integers(0, 31))
def test_nothing_but_autoparser_errors(g: Grammar, text: str, partial: bool, start: int) -> None:
    arena, gid, _ = g.build()
    for parser in (None, gid):
        try:
            r = arena.parse(text, partial=partial, start=min(start, len(text)), parser=parser)
        except AutoparserError:
            continue
        assert r.type in (ResultType.SUCCESS, ResultType.FAIL, ResultType.NEED_MORE_INPUT)
        assert r.start <= r.end <= len(text)
        r.tags()
        for node in r.walk():
            assert 0 <= node.start <= node.end <= len(text)
            node.sanitized_text()
        try:
            r.raise_for_failure()
        except AutoparserError:
            assert r.fail
    arena.dump()
    str(arena)


def test_until_cut_off_delimiter_is_the_documented_exception() -> None:
    """The counterexample behind the exception in the streaming property, pinned down."""
    arena = build_peg_parser(lambda p: p.until("ab") + p.end())
    assert arena.parse("xac").success
    assert arena.parse("xa", partial=True).fail  # stops before "a", which end() then rejects
    assert not arena.parse("x", partial=True).fail
    assert _ends_inside_delimiter("xa", {"ab"})
    assert not _ends_inside_delimiter("xab", {"ab"})


# --- property 4: the engine's fast scans agree with a literal port of the C++ walk ------------------------------
#
# The engine replaces the C++ byte-by-byte loops with str.find / regular expressions wherever the text holds no
# undecodable bytes. This reference evaluator walks code point by code point exactly as peg-parser.cpp's
# `parser_executor` does, with no shortcuts; both must agree on type, end, invalid runs and the whole AST.

_FAIL, _OK, _MORE = int(ResultType.FAIL), int(ResultType.SUCCESS), int(ResultType.NEED_MORE_INPUT)
_HEX = "0123456789abcdefABCDEF"


class _TooDeep(Exception):
    pass


def _reference(arena: Arena, text: str, partial: bool, pid: int) -> Any:
    n = len(text)
    ast: list[tuple[Any, ...]] = []
    depth = [0]
    Raw = tuple[int, int, tuple[int, ...], tuple[tuple[int, int], ...]]

    def more_or_fail(pos: int, fail_end: int) -> Raw:
        return (_MORE, pos, (), ()) if partial else (_FAIL, fail_end, (), ())

    def ev(pid: int, pos: int) -> Raw:
        node = arena.parsers[pid]
        if isinstance(node, N.Epsilon):
            return _OK, pos, (), ()
        if isinstance(node, (N.Start, N.End)):
            ok = pos == 0 if isinstance(node, N.Start) else pos >= n
            return (_OK if ok else _FAIL), pos, (), ()
        if isinstance(node, N.Literal):  # bytes, as the C++ compares them
            want, got = node.literal.encode("utf-8", "surrogateescape"), text[pos:].encode("utf-8", "surrogateescape")
            if got.startswith(want):
                return _OK, pos + len(node.literal), (), ()
            return more_or_fail(n, pos) if want.startswith(got) else (_FAIL, pos, (), ())
        if isinstance(node, N.Sequence):
            p = pos
            nodes: tuple[int, ...] = ()
            inv: tuple[tuple[int, int], ...] = ()
            for c in node.children:
                t, e, nd, iv = ev(c, p)
                if t == _FAIL:
                    return _FAIL, e, (), ()
                nodes, inv = nodes + nd, inv + iv
                if t == _MORE:
                    return _MORE, e, nodes, inv
                p = e
            return _OK, p, nodes, inv
        if isinstance(node, N.Choice):
            for c in node.children:
                r = ev(c, pos)
                if r[0] != _FAIL:
                    return r
            return _FAIL, pos, (), ()
        if isinstance(node, N.Repetition):
            p, count = pos, 0
            nodes, inv = (), ()
            while (node.max_count == -1 or count < node.max_count) and p < n:
                t, e, nd, iv = ev(node.child, p)
                if t == _MORE:
                    return _MORE, e, nodes + nd, inv + iv
                if t == _FAIL or e == p:
                    break
                p, count, nodes, inv = e, count + 1, nodes + nd, inv + iv
            if count < node.min_count:
                return (_MORE, p, nodes, inv) if p >= n and partial else (_FAIL, p, (), ())
            return _OK, p, nodes, inv
        if isinstance(node, N.And):
            return ev(node.child, pos)[0], pos, (), ()
        if isinstance(node, N.Not):
            return {_OK: _FAIL, _MORE: _MORE, _FAIL: _OK}[ev(node.child, pos)[0]], pos, (), ()
        if isinstance(node, N.Any_):
            status, _, length = decode_at(text, pos)
            if status == INCOMPLETE:
                return more_or_fail(pos, pos)
            return (_FAIL, pos, (), ()) if status == INVALID else (_OK, pos + length, (), ())
        if isinstance(node, N.Space):
            p = pos
            while p < n and text[p] in N.C_SPACE:
                p += 1
            return _OK, p, (), ()
        if isinstance(node, N.Chars):
            p, count = pos, 0
            while node.max_count == -1 or count < node.max_count:
                status, cp, length = decode_at(text, p)
                if status != UTF8_OK:
                    if count >= node.min_count:
                        return _OK, p, (), ()
                    return more_or_fail(p, pos) if status == INCOMPLETE else (_FAIL, pos, (), ())
                if any(r.start <= cp <= r.end for r in node.ranges) == node.negated:
                    break
                p, count = p + length, count + 1
            if count < node.min_count:
                return (_MORE, p, (), ()) if p >= n and partial else (_FAIL, p, (), ())
            return _OK, p, (), ()
        if isinstance(node, N.String):
            p, d = pos, node.delimiter
            while p < n:
                if text[p] == d:
                    return _OK, p, (), ()
                if text[p] == "\\":
                    if p + 1 >= n:
                        return more_or_fail(p, pos)
                    if text[p + 1] in d + "\\/bfnrt":
                        p += 2
                        continue
                    if text[p + 1] != "u":
                        return _FAIL, pos, (), ()
                    for q in range(p + 2, p + 6):
                        if q >= n:
                            return more_or_fail(p, pos)
                        if text[q] not in _HEX:
                            return _FAIL, pos, (), ()
                    p += 6
                    continue
                status, _, length = decode_at(text, p)
                if status != UTF8_OK:
                    return more_or_fail(p, pos) if status == INCOMPLETE else (_FAIL, pos, (), ())
                p += length
            return (_MORE if partial else _FAIL), n, (), ()
        if isinstance(node, N.Until):
            trie = Trie(list(node.delimiters))
            p = last = pos
            runs: list[tuple[int, int]] = []
            while p < n:
                status, _, length = decode_at(text, p)
                if status == INCOMPLETE and partial:
                    return _MORE, last, (), tuple(runs)
                if status != UTF8_OK:
                    runs.append((p, length))
                elif trie.check_at(text, p) != NO_MATCH:
                    return _OK, p, (), tuple(runs)
                p = last = p + length
            return (_MORE if last == n and partial else _OK), last, (), tuple(runs)
        if isinstance(node, (N.Rule, N.Tag)):
            depth[0] += 1
            if depth[0] > MAX_RULE_DEPTH:
                raise _TooDeep
            t, e, nd, iv = ev(node.child, pos)
            depth[0] -= 1
            if t == _FAIL:
                return t, e, nd, iv
            ast.append((node.name if isinstance(node, N.Rule) else "", node.tag if isinstance(node, N.Tag) else "",
                        pos, e, text[pos:e] if pos < n else "", t == _MORE, iv, nd))
            return t, e, (len(ast) - 1,), iv
        if isinstance(node, N.Ref):
            return ev(arena.rules[node.name], pos)
        if isinstance(node, N.Atomic):
            t, e, nd, iv = ev(node.child, pos)
            return (t, e, (), iv) if t == _MORE else (t, e, nd, iv)
        if isinstance(node, (N.Schema, N.Gbnf, N.Ac)):
            return ev(node.child, pos)
        raise AssertionError(node)

    try:
        t, e, nd, iv = ev(pid, 0)
    except (_TooDeep, RecursionError):
        return None
    walked: list[tuple[Any, ...]] = []
    stack = list(reversed(nd))
    while stack:
        node = ast[stack.pop()]
        walked.append(node[:7])
        stack.extend(reversed(node[7]))
    return (ResultType(t), 0, e, iv, walked)


ESCAPED = ["", "\udcff", "\udce4\udcb8", "\udcc3", "\udc80", "\udcf0\udc9f"]


@SETTINGS
@given(grammar_and_input(), st.booleans(), st.sampled_from(ESCAPED), st.integers(0, 40))
def test_engine_agrees_with_reference_walk(case: tuple[Grammar, str], partial: bool, junk: str, at: int) -> None:
    g, text = case
    at = min(at, len(text))
    text = text[:at] + junk + text[at:]  # undecodable bytes switch the engine to its exact walks
    arena, gid, root = g.build()
    for pid in (root, gid):
        assert _fingerprint(_outcome(arena, text, partial=partial, parser=pid)) == \
            _reference(arena, text, partial, pid)


@SETTINGS
@given(grammar_and_input(), st.sampled_from(ESCAPED), st.integers(0, 40))
def test_generated_code_agrees_with_closures(case: tuple[Grammar, str], junk: str, at: int) -> None:
    """peg/codegen.py's functions against the closures, on every prefix in both modes: same results, same AST
    nodes (abandoned ones too), same end-of-input observations."""
    g, text = case
    at = min(at, len(text))
    text = text[:at] + junk + text[at:]
    arena, gid, root = g.build()
    for pid in (root, gid):
        check = CodegenCheck(arena, pid)
        for k in range(len(text) + 1):
            for partial in (False, True):
                problem = check.mismatch(text[:k], partial=partial)
                assert problem is None, f"{problem}\n{arena}"


@SETTINGS
@given(st.sampled_from(["<｜tool▁calls▁begin｜>", "</think>", "世界"]),
       st.sampled_from(["", "x", "é", "</", "<｜"]), st.integers(0, 30), st.booleans())
def test_engine_agrees_with_reference_on_cut_utf8(marker: str, before: str, cut: int, partial: bool) -> None:
    data = (before + marker + "tail").encode()[:cut]
    text = data.decode("utf-8", "surrogateescape")
    b = Builder()
    root = b.tag("c", b.until(marker)) + b.optional(b.literal(marker) + b.tag("r", b.rest()))
    arena = b.build(root)
    assert _fingerprint(_outcome(arena, data, partial=partial)) == _reference(arena, text, partial, root.id)


# --- property: a resumed parse is the parse of the longer text ----------------------------------------------------

@SETTINGS
@given(grammar_and_input(), st.integers(1, 5))
def test_a_resumed_parse_is_the_parse_of_the_longer_text(case: tuple[Grammar, str], size: int) -> None:
    """peg/resume.py: from every prefix whose partial parse can be resumed, extended `size` characters at a time
    for as long as the resumption accepts: each extended result has the type, end and reachable AST nodes of a
    parse of that longer text from the start. (Streaming relies on it for every kind of end-of-input
    decision it resumes: a scan running into the end, a literal or delimiter cut off by it.) Text ending inside
    a JSON escape is taken up to the escape (extend_before_cut_escape): that result is the longer text's parse
    too, and the escape is fed again with the next characters."""
    from autoparser.peg.resume import resumption

    g, text = case
    arena, _gid, root = g.build()
    for i in range(len(text) + 1):
        base = _outcome(arena, text[:i], partial=True, parser=root)
        resume = resumption(arena, base) if base is not None else None
        if resume is None:
            continue
        j, held = i, 0  # checked up to j; the `held` characters after it are a cut escape, fed again
        while j + held < len(text):
            end = min(j + held + size, len(text))
            # the stream's fast path takes a piece without a stop character as surely extending the parse
            sure = resume.stops is not None and resume.stops(text[j:end]) is None
            if resume.extend(text[j:end]):
                j, held = end, 0
            else:
                assert not sure, (text[:j], text[j:end], arena)
                cut = resume.extend_before_cut_escape(text[j:end])
                if not cut:
                    break
                j, held = end - cut, cut
            assert _fingerprint(resume.result(text[:j])) == \
                _fingerprint(_outcome(arena, text[:end], partial=True, parser=root)), (text[:i], text[i:end], arena)


@SETTINGS
@given(st.lists(st.text("<a/b", min_size=1, max_size=4), min_size=1, max_size=3), st.text("<a/bc\udc80", max_size=12),
       st.lists(st.text("<a/bc\udc80", min_size=1, max_size=4), max_size=6))
def test_a_piece_without_a_stop_character_extends_an_until_scan(delimiters: list[str], text: str,
                                                                 pieces: list[str]) -> None:
    """Resumption.stops for an `until` (the first characters of its delimiters, and undecodable bytes): once a
    check passed, a piece holding none of them passes too, whatever the few characters before it hold (the
    start of a delimiter that turned out to be none, `<a` for `<ab`, or a cut one that came before)."""
    from autoparser.peg.resume import resumption

    b = Builder()
    arena = b.build(b.tag("c", b.until_one_of(delimiters)) + b.tag("r", b.rest()))
    resume = resumption(arena, arena.parse(text, partial=True))
    if resume is None or resume.stops is None:
        return
    for piece in pieces:
        sure = resume.stops(piece) is None
        extended = resume.extend(piece)
        assert extended or not sure, (delimiters, text, piece)
        if not extended:
            return
        text += piece
        assert _fingerprint(resume.result(text)) == _fingerprint(arena.parse(text, partial=True))


def test_text_ending_inside_a_json_escape_is_taken_up_to_the_escape() -> None:
    from autoparser.peg.resume import resumption

    b = Builder()
    arena = b.build(b.tag("j", b.json()) + b.end())
    text = '{"a": "xy'
    resume = resumption(arena, arena.parse(text, partial=True))
    assert resume is not None
    for piece, cut in [("z\\", 1), ("\\u", 2), ("z\\u00", 4), ("\\u00e", 5)]:
        fresh = resumption(arena, arena.parse(text, partial=True))
        assert fresh is not None
        assert fresh.extend_before_cut_escape(piece) == cut, piece
        kept = text + piece[:len(piece) - cut]
        assert _fingerprint(fresh.result(kept)) == _fingerprint(arena.parse(text + piece, partial=True)), piece
    # not a cut escape: an invalid one, a bad hex digit, complete escapes; and a refusal leaves no trace
    for piece in ["\\x", "\\u0g", "\\\\", "z", '"']:
        assert resume.extend_before_cut_escape(piece) == 0, piece
    assert resume.extend("\\\\z")
    assert _fingerprint(resume.result(text + "\\\\z")) == _fingerprint(arena.parse(text + "\\\\z", partial=True))


def test_a_resumption_rechecks_a_cut_off_delimiter_and_the_literal_after_it() -> None:
    from autoparser.peg.resume import resumption

    b = Builder()
    arena = b.build(b.tag("c", b.until_one_of(["</t>", "</b>"])) + b.literal("</t>") + b.tag("r", b.rest()))
    resume = resumption(arena, arena.parse("x</", partial=True))
    assert resume is not None
    assert not resume.extend("b")  # "</b" may still stop the text, but is no longer the start of the literal
    assert resume.extend("t")  # a refused extension left no trace
    assert _fingerprint(resume.result("x</t")) == _fingerprint(arena.parse("x</t", partial=True))
    assert not resume.extend(">")
