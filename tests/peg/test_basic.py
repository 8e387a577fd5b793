"""Port of llama.cpp tests/peg-parser/test-basic.cpp: character classes, optional, recursive rules, markers.

The "partial parsing" group of that suite (including its char-class cases) lives in test_partial.py.
"""

from __future__ import annotations

import pytest

from autoparser.peg import Arena, Builder, P, ResultType, build_peg_parser

# --- chars ------------------------------------------------------------------------------------------------------

ESCAPES = r"[\n\t\\]"  # the class string holds backslash escapes, as in the C++ source


@pytest.mark.parametrize(("text", "expected"), [
    ("\n", ResultType.SUCCESS),   # escape_sequence_newline
    ("\t", ResultType.SUCCESS),   # escape_sequence_tab
    ("\\", ResultType.SUCCESS),   # escape_sequence_backslash
    (" ", ResultType.FAIL),       # escape_sequence_space_fail
])
def test_chars_escape_sequences(text: str, expected: ResultType) -> None:
    parser = build_peg_parser(lambda p: p.chars(ESCAPES))
    assert parser.parse(text).type == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("a", ResultType.SUCCESS),    # escaped_dash_a
    ("-", ResultType.SUCCESS),    # escaped_dash_literal
    ("z", ResultType.SUCCESS),    # escaped_dash_z
    ("b", ResultType.FAIL),       # escaped_dash_b_fail: `\-` is a dash, not a range a..z
])
def test_chars_escaped_dash(text: str, expected: ResultType) -> None:
    parser = build_peg_parser(lambda p: p.chars(r"[a\-z]"))
    assert parser.parse(text).type == expected


def test_chars_brackets_are_optional() -> None:
    with_brackets = build_peg_parser(lambda p: p.chars("[a-z]") + p.end())
    without = build_peg_parser(lambda p: p.chars("a-z") + p.end())
    for text in ("abc", "aBc", "", "-"):
        assert with_brackets.parse(text).type == without.parse(text).type


def test_chars_consumes_maximal_run() -> None:
    r = build_peg_parser(lambda p: p.chars("[a-z]")).parse("abc123")
    assert r.type == ResultType.SUCCESS
    assert (r.start, r.end) == (0, 3)


# --- optional ---------------------------------------------------------------------------------------------------

def _hello_world() -> Arena:
    return build_peg_parser(lambda p: p.literal("hello") + p.optional(p.literal(" world")))


def test_optional_present() -> None:
    r = _hello_world().parse("hello world")
    assert r.type == ResultType.SUCCESS
    assert r.end == 11


def test_optional_absent() -> None:
    r = _hello_world().parse("hello")
    assert r.type == ResultType.SUCCESS
    assert r.end == 5


def test_optional_partial_match_needs_more_input() -> None:
    # "hello " could still become "hello world": a partial parse must wait.
    r = _hello_world().parse("hello ", partial=True)
    assert r.type == ResultType.NEED_MORE_INPUT


def test_optional_partial_in_strict_mode_stops_before_it() -> None:
    r = _hello_world().parse("hello ")
    assert r.type == ResultType.SUCCESS
    assert r.end == 5


# --- recursive rules --------------------------------------------------------------------------------------------

def _value_parser() -> Arena:
    def build(p: Builder) -> P:
        p.rule("number", p.chars("0-9"))
        p.rule("list", p.literal("[") + p.ref("value") + p.literal("]"))
        return p.rule("value", p.ref("number") | p.ref("list"))

    return build_peg_parser(build)


@pytest.mark.parametrize(("text", "partial", "expected"), [
    ("1", False, ResultType.SUCCESS),               # simple_number
    ("[1]", False, ResultType.SUCCESS),             # simple_list
    ("[[2]]", False, ResultType.SUCCESS),           # nested_list
    ("[[[3]]]", False, ResultType.SUCCESS),         # deeply_nested_list
    ("[[", True, ResultType.NEED_MORE_INPUT),       # need_more_input_match
    ("[a]", False, ResultType.FAIL),                # no_match
])
def test_recursive_rules(text: str, partial: bool, expected: ResultType) -> None:
    r = _value_parser().parse(text, partial=partial)
    assert r.type == expected
    if expected == ResultType.SUCCESS:
        assert r.end == len(text)


def test_recursive_rule_builds_nested_ast() -> None:
    r = _value_parser().parse("[[2]]")
    rules = [(n.rule, n.text) for n in r.walk()]
    assert rules == [("value", "[[2]]"), ("list", "[[2]]"), ("value", "[2]"), ("list", "[2]"),
                     ("value", "2"), ("number", "2")]


def test_rule_names_are_sanitised() -> None:
    b = Builder()
    ref = b.rule("tool-special_function", b.literal("x"))
    arena = b.build(ref)
    assert arena.has_rule("tool-special-function")
    assert [n.rule for n in arena.parse("x").walk()] == ["tool-special-function"]


@pytest.mark.parametrize("text", ["[marker]", "<marker>"])
def test_marker(text: str) -> None:
    r = build_peg_parser(lambda p: p.marker()).parse(text)
    assert r.type == ResultType.SUCCESS
    assert r.end == len(text)


def test_marker_rejects_mismatched_brackets() -> None:
    assert build_peg_parser(lambda p: p.marker() + p.end()).parse("<marker]").type == ResultType.FAIL
