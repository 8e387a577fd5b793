"""Port of llama.cpp tests/peg-parser/test-json-parser.cpp: the `json()` helper and `json_member`."""

from __future__ import annotations

import json

import pytest

from autoparser.peg import Arena, ResultType, build_peg_parser


@pytest.fixture(scope="module")
def json_parser() -> Arena:
    return build_peg_parser(lambda p: p.json())


@pytest.mark.parametrize("text", [
    '{"name": "test", "value": 42, "flag": true}',                    # simple JSON object parsing
    '[1, "hello", true, null, 3.14]',                                  # JSON array with mixed types
    '{"users": [{"id": 1, "name": "Alice"}, {"id": 2, "name": "Bob"}], "count": 2, '
    '"metadata": {"version": "1.0", "tags": ["admin", "user"]}}',     # nested JSON with objects and arrays
])
def test_complete_json_consumes_everything(json_parser: Arena, text: str) -> None:
    r = json_parser.parse(text)
    assert r.type == ResultType.SUCCESS
    assert r.end == len(text)


@pytest.mark.parametrize("text", [
    '{"name": "test", "value": ',   # incomplete object
    "[1, 2, 3, ",                   # incomplete array
    '{"data": {"nested": ',         # incomplete nested structure
])
def test_incomplete_json_needs_more_input(json_parser: Arena, text: str) -> None:
    assert json_parser.parse(text, partial=True).type == ResultType.NEED_MORE_INPUT


@pytest.mark.parametrize("text", [
    '{"text": "hello\\',      # dangling backslash
    '{"text": "hello\\u',     # incomplete unicode escape
    '{"text": "hello\\u00',
])
def test_incomplete_escape_is_not_part_of_partial_value(json_parser: Arena, text: str) -> None:
    r = json_parser.parse(text, partial=True)
    assert r.type == ResultType.NEED_MORE_INPUT
    assert r.end == text.index("\\")


def test_json_value_ast(json_parser: Arena) -> None:
    r = json_parser.parse('{"a": [1, "x"]}')
    assert r.type == ResultType.SUCCESS
    rules = [(n.rule, n.text) for n in r.walk()]
    assert rules == [
        ("json-value", '{"a": [1, "x"]}'), ("json-object", '{"a": [1, "x"]}'), ("json-string", '"a"'),
        ("json-value", '[1, "x"]'), ("json-array", '[1, "x"]'), ("json-value", "1"), ("json-number", "1"),
        ("json-value", '"x"'), ("json-string", '"x"'),
    ]


@pytest.mark.parametrize("text", ["01", "[1,]", '{"a" 1}', "tru", "'x'", "[1 2]", '"\\x"'])
def test_invalid_json_does_not_parse_completely(text: str) -> None:
    parser = build_peg_parser(lambda p: p.json() + p.end())
    assert parser.parse(text).type == ResultType.FAIL


def test_number_at_end_of_partial_input_is_not_committed(json_parser: Arena) -> None:
    # "3" may still become "3.14": the trailing lookahead asks for more.
    assert json_parser.parse("3", partial=True).type == ResultType.NEED_MORE_INPUT
    assert json_parser.parse("3").type == ResultType.SUCCESS
    assert json_parser.parse("3 ", partial=True).type == ResultType.SUCCESS


@pytest.mark.parametrize("value", [
    0, -1, 3.5, 1e10, -2.5e-3, "", "é \" \\ \n", [], {}, [[], {}], {"k": [1, None, True, False]},
])
def test_json_accepts_what_json_dumps_writes(json_parser: Arena, value: object) -> None:
    for text in (json.dumps(value), json.dumps(value, indent=2)):
        r = json_parser.parse(text)
        assert r.type == ResultType.SUCCESS
        assert r.end == len(text)


# --- object member -----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def member_parser() -> Arena:
    return build_peg_parser(lambda p: p.json_member("name", '"' + p.chars("[a-z]") + '"'))


def test_member_success(member_parser: Arena) -> None:
    assert member_parser.parse('"name": "bob"').type == ResultType.SUCCESS


def test_member_partial(member_parser: Arena) -> None:
    assert member_parser.parse('"name": "bo', partial=True).type == ResultType.NEED_MORE_INPUT


def test_member_failed(member_parser: Arena) -> None:
    assert member_parser.parse("[]").type == ResultType.FAIL
