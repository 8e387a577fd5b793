"""Errors at the API edges of the PEG engine: ParseError from a FAIL, SerializationError, GrammarError."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from autoparser.errors import AutoparserError, GrammarError, ParseError, SerializationError
from autoparser.peg import Arena, Builder, build_peg_parser, load, save
from autoparser.peg import nodes as N
from autoparser.peg.nodes import INVALID_ID

# --- ParseResult.raise_for_failure -----------------------------------------------------------------------------


def test_raise_for_failure_position_and_caret() -> None:
    r = build_peg_parser(lambda p: p.literal("hello") + p.literal(" world")).parse("hello wxrld")
    assert r.fail
    with pytest.raises(ParseError) as info:
        r.raise_for_failure()
    err = info.value
    assert err.position == 5
    assert err.text == "hello wxrld"
    assert str(err) == "input does not match the grammar\nat position 5\nhello wxrld\n     ^"


def test_raise_for_failure_custom_message_and_newlines() -> None:
    r = build_peg_parser(lambda p: p.literal("a\nb") + p.literal("c")).parse("a\nbX")
    with pytest.raises(ParseError) as info:
        r.raise_for_failure("tool call is malformed")
    lines = str(info.value).split("\n")
    assert lines == ["tool call is malformed", "at position 3", "a⏎bX", "   ^"]


def test_raise_for_failure_long_input_is_elided() -> None:
    text = "x" * 100 + "!" + "y" * 100
    r = build_peg_parser(lambda p: p.chars("[x]") + p.end()).parse(text)
    assert r.end == 100
    with pytest.raises(ParseError) as info:
        r.raise_for_failure()
    excerpt, caret = str(info.value).split("\n")[2:]
    assert excerpt == "…" + "x" * 30 + "!" + "y" * 29 + "…"
    assert caret.index("^") == 31
    assert excerpt[caret.index("^")] == "!"


@pytest.mark.parametrize(("text", "partial"), [("hello world", False), ("hello", True), ("hel", True)])
def test_raise_for_failure_is_silent_unless_fail(text: str, partial: bool) -> None:
    r = build_peg_parser(lambda p: p.literal("hello") + p.literal(" world")).parse(text, partial=partial)
    assert not r.fail
    r.raise_for_failure()


def test_parse_error_is_an_autoparser_error() -> None:
    r = build_peg_parser(lambda p: p.literal("a")).parse("b")
    with pytest.raises(AutoparserError):
        r.raise_for_failure()


# --- serialisation ------------------------------------------------------------------------------------------------

VALID = save(build_peg_parser(lambda p: p.rule("r", p.literal("x") + p.tag("t", p.rest()))))


@pytest.mark.parametrize("data", [
    "",
    "not json",
    "{",
    "[]",
    "null",
    '"parsers"',
    '{"rules": {}, "root": 0}',                                          # no parsers
    '{"parsers": {}, "rules": {}, "root": 0}',                           # parsers not an array
    '{"parsers": [], "root": 0}',                                        # no rules
    '{"parsers": [], "rules": [], "root": 0}',                           # rules not an object
    '{"parsers": [], "rules": {}}',                                      # no root
    '{"parsers": [], "rules": {}, "root": "0"}',                         # root not an id
    '{"parsers": [], "rules": {}, "root": true}',
    '{"parsers": [], "rules": {}, "root": 0}',                           # root out of range
    '{"parsers": [{"type": "epsilon"}], "rules": {}, "root": -1}',
    '{"parsers": [{"type": "frobnicate"}], "rules": {}, "root": 0}',     # unknown type
    '{"parsers": [{"kind": "literal"}], "rules": {}, "root": 0}',        # no type
    '{"parsers": [7], "rules": {}, "root": 0}',
    '{"parsers": [{"type": "literal"}], "rules": {}, "root": 0}',        # missing field
    '{"parsers": [{"type": "literal", "literal": 3}], "rules": {}, "root": 0}',
    '{"parsers": [{"type": "sequence", "children": [5]}], "rules": {}, "root": 0}',   # dangling child
    '{"parsers": [{"type": "sequence", "children": [true]}], "rules": {}, "root": 0}',
    '{"parsers": [{"type": "sequence", "children": "0"}], "rules": {}, "root": 0}',
    '{"parsers": [{"type": "not", "child": -1}], "rules": {}, "root": 0}',
    '{"parsers": [{"type": "repetition", "child": 0, "min_count": "1", "max_count": 1}], "rules": {}, "root": 0}',
    '{"parsers": [{"type": "chars", "pattern": "a", "ranges": [{"start": "a"}], "negated": false, '
    '"min_count": 1, "max_count": 1}], "rules": {}, "root": 0}',
    '{"parsers": [{"type": "string", "delimiter": ""}], "rules": {}, "root": 0}',
    '{"parsers": [{"type": "until", "delimiters": [1]}], "rules": {}, "root": 0}',
    '{"parsers": [{"type": "ac", "child": 0, "delimiters": []}], "rules": {}, "root": 0}',
    '{"parsers": [{"type": "rule", "name": "r", "child": 0}], "rules": {}, "root": 0}',  # no trigger
    '{"parsers": [{"type": "epsilon"}], "rules": {"r": 3}, "root": 0}',                  # rule id out of range
    '{"parsers": [{"type": "epsilon"}], "rules": {"r": "0"}, "root": 0}',
])
def test_load_garbage_raises_serialization_error(data: str) -> None:
    with pytest.raises(SerializationError):
        load(data)


def test_serialization_error_is_a_grammar_error() -> None:
    with pytest.raises(GrammarError):
        load("{}")


def test_load_rejects_non_string_input() -> None:
    with pytest.raises(SerializationError):
        load(None)  # type: ignore[arg-type]


def test_every_truncation_of_a_valid_arena_is_rejected_cleanly() -> None:
    for cut in range(len(VALID)):
        with pytest.raises(SerializationError):
            load(VALID[:cut])


def test_bad_ids_in_a_real_arena() -> None:
    j = json.loads(VALID)
    j["root"] = len(j["parsers"])
    with pytest.raises(SerializationError, match="Root references invalid parser ID"):
        load(json.dumps(j))
    j = json.loads(VALID)
    j["rules"]["r"] = 10_000
    with pytest.raises(SerializationError, match="Rule 'r' references invalid parser ID: 10000"):
        load(json.dumps(j))


# --- grammar errors -----------------------------------------------------------------------------------------------

def test_unknown_rule_raises_grammar_error_at_build() -> None:
    b = Builder()
    root = b.literal("a") + b.ref("missing")
    with pytest.raises(GrammarError, match="Rule not found: missing"):
        b.build(root)


def test_unknown_rule_reached_at_parse_time() -> None:
    # A loaded arena can hold a ref whose rule is gone; reaching it raises, parsing around it does not.
    arena = Arena([N.Literal("a"), N.Ref("gone"), N.Choice((0, 1))], {}, 2)
    assert arena.parse("a").success
    with pytest.raises(GrammarError, match="Rule not found: gone"):
        arena.parse("b")


def test_get_rule_unknown() -> None:
    arena = build_peg_parser(lambda p: p.rule("known", p.literal("a")))
    assert arena.get_rule("known") == arena.rules["known"]
    with pytest.raises(GrammarError, match="Rule not found: unknown"):
        arena.get_rule("unknown")


def test_parse_without_root() -> None:
    arena = Arena()
    assert arena.root == INVALID_ID
    with pytest.raises(GrammarError, match="No root parser set"):
        arena.parse("x")


@pytest.mark.parametrize(("call", "match"), [
    (lambda b: b.chars(""), "character class"),
    (lambda b: b.string_content("ab"), "one character"),
    (lambda b: b.string_content(""), "one character"),
    (lambda b: b.ac(b.literal("x"), []), "at least one delimiter"),
])
def test_builder_rejects_bad_arguments(call: Callable[[Builder], object], match: str) -> None:
    with pytest.raises(GrammarError, match=match):
        call(Builder())
