"""Pathological input sizes: deep nesting must end in a clean result or a clean ParseError, never a
RecursionError or a crash; long flat input must scan whole (its speed: `tox -e bench`).
"""

from __future__ import annotations

import pytest

from autoparser.errors import ParseError
from autoparser.peg import Arena, Builder, P, ResultType, build_peg_parser
from autoparser.peg.engine import MAX_RULE_DEPTH

LEVELS = 100_000


@pytest.fixture(scope="module")
def json_parser() -> Arena:
    return build_peg_parser(lambda p: p.json())


def _parse_or_error(arena: Arena, text: str, partial: bool) -> ResultType | ParseError:
    try:
        return arena.parse(text, partial=partial).type
    except ParseError as e:
        return e


@pytest.mark.parametrize("partial", [False, True], ids=["strict", "partial"])
@pytest.mark.parametrize("text", [
    "[" * LEVELS,
    '{"a":' * LEVELS,
    "[" * LEVELS + "]" * LEVELS,
    '{"a":' * LEVELS + "1" + "}" * LEVELS,
], ids=["open-arrays", "open-objects", "closed-arrays", "closed-objects"])
def test_deep_json_gives_clean_parse_error(json_parser: Arena, text: str, partial: bool) -> None:
    outcome = _parse_or_error(json_parser, text, partial)
    assert isinstance(outcome, ParseError)
    assert "nested more than" in outcome.reason
    # the error points inside the input, at the opening bracket where the depth limit was hit
    assert 0 < outcome.position < 10 * MAX_RULE_DEPTH
    assert text[outcome.position] in '[{"'
    assert len(str(outcome)) < 500  # the excerpt stays short however long the input is


@pytest.mark.parametrize("partial", [False, True], ids=["strict", "partial"])
def test_nesting_within_the_limit_still_parses(json_parser: Arena, partial: bool) -> None:
    # each JSON level costs two rules (json-value and json-array / json-object)
    levels = MAX_RULE_DEPTH // 2 - 1
    text = "[" * levels + "]" * levels
    r = json_parser.parse(text, partial=partial)
    assert (r.type, r.end) == (ResultType.SUCCESS, len(text))
    partial = json_parser.parse("[" * levels, partial=True)
    assert partial.type == ResultType.NEED_MORE_INPUT


def test_the_parser_stays_usable_after_a_depth_error(json_parser: Arena) -> None:
    with pytest.raises(ParseError):
        json_parser.parse("[" * LEVELS)
    assert json_parser.parse("[1, [2]]").type == ResultType.SUCCESS


def test_deep_combinator_nesting_between_rules_gives_parse_error() -> None:
    # Many combinators between two rule levels use many stack frames per level: the stack runs out before
    # the rule-depth guard trips. That must still surface as a ParseError.
    b = Builder()

    def body() -> P:
        x = b.literal("(") + b.ref("r")
        for i in range(40):
            x = b.choice([b.sequence([x, b.eps()]), b.literal("#")]) if i % 2 else b.optional(b.sequence([b.eps(), x]))
        return x

    arena = b.build(b.rule("r", body))
    for partial in (False, True):
        with pytest.raises(ParseError):
            arena.parse("(" * LEVELS, partial=partial)
    assert arena.parse("((#").type == ResultType.SUCCESS


def test_left_recursion_gives_parse_error() -> None:
    # PEG cannot handle left recursion; it must not take the interpreter down either.
    def build(p: Builder) -> P:
        return p.rule("expr", lambda: p.ref("expr") + "+" + p.literal("1") | p.literal("1"))

    arena = build_peg_parser(build)
    with pytest.raises(ParseError):
        arena.parse("1+1")


# --- long flat input -----------------------------------------------------------------------------------------

MB = 1 << 20


@pytest.mark.parametrize("partial", [False, True], ids=["strict", "partial"])
def test_until_over_one_megabyte(partial: bool) -> None:
    chunk = "lorem ipsum <dolor> sit amet, é 世界 "
    body = (chunk * (MB // len(chunk) + 1))[:MB]
    parser = build_peg_parser(lambda p: p.tag("body", p.until("</done>")) + p.literal("</done>") + p.end())
    # (its speed is `tox -e bench`'s: `until` over 100 KB, never a timed test)
    r = parser.parse(body + "</done>", partial=partial)
    assert r.type == ResultType.SUCCESS
    assert r.end == MB + len("</done>")
    assert r.ast.get(r.nodes[0]).text == body


def test_until_over_one_megabyte_with_a_cut_off_delimiter() -> None:
    body = "x" * MB
    parser = build_peg_parser(lambda p: p.tag("body", p.until("</done>")))
    r = parser.parse(body + "</do", partial=True)
    assert (r.type, r.end) == (ResultType.SUCCESS, MB)


@pytest.mark.parametrize("partial", [False, True], ids=["strict", "partial"])
def test_rest_over_one_megabyte(partial: bool) -> None:
    body = "0123456789abcdef" * (MB // 16)
    parser = build_peg_parser(lambda p: p.literal("<c>") + p.tag("content", p.rest()))
    r = parser.parse("<c>" + body, partial=partial)
    assert r.type == (ResultType.NEED_MORE_INPUT if partial else ResultType.SUCCESS)
    assert r.end == MB + 3
    assert r.tags() == {"content": body}


def test_rest_over_one_megabyte_with_invalid_bytes() -> None:
    data = b"ab\xff" * (MB // 3)
    r = build_peg_parser(lambda p: p.tag("content", p.rest())).parse(data)
    assert r.type == ResultType.SUCCESS
    assert r.end == len(data)
    assert len(r.invalid_utf8) == MB // 3
    assert r.ast.get(r.nodes[0]).sanitized_text() == "ab\ufffd" * (MB // 3)


def test_long_json_string_and_array() -> None:
    text = '{"s": "' + "y" * MB + '", "a": [' + ", ".join(["1"] * 20_000) + "]}"
    r = build_peg_parser(lambda p: p.json()).parse(text)
    assert (r.type, r.end) == (ResultType.SUCCESS, len(text))
