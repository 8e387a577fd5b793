"""Port of llama.cpp tests/peg-parser/test-python-dict-parser.cpp: python_value() and flexible json strings."""

from __future__ import annotations

import pytest

from autoparser.peg import Arena, Builder, P, ResultType, build_peg_parser


@pytest.fixture(scope="module")
def python_parser() -> Arena:
    return build_peg_parser(lambda p: p.python_value())


@pytest.mark.parametrize("text", [
    "{'name': 'test', 'value': 42, 'flag': True}",
    "[1, 'hello', True, None, 3.14]",
    "{'users': [{'id': 1, 'name': 'Alice'}, {'id': 2, 'name': 'Bob'}], 'count': 2, "
    "'metadata': {'version': '1.0', 'tags': ['admin', 'user']}}",
    "{'message': 'It\\'s working!'}",                                   # escaped single quote
    "{'quote': 'He said \"Hello\"'}",                                    # double quotes inside single
    "{ 'obj' : { 'something': 1, 'other \"something\"' : 'foo\\'s bar' } }",
    # non-ASCII: the C++ compares end with the byte size; here both sides count code points
    "{'message': 'Hello, 世界!'}",
    "{'unicode': 'Hello\\u0041'}",
    '{"name": "test"}',                                                  # double-quoted strings accepted
    "{\"name\": 'test', 'value': \"hello\"}",                            # mixed quote styles
    "True",
    "False",
    "None",
])
def test_python_values_consume_everything(python_parser: Arena, text: str) -> None:
    r = python_parser.parse(text)
    assert r.type == ResultType.SUCCESS
    assert r.end == len(text)


@pytest.mark.parametrize("text", [
    "{'name': 'test', 'value': ",   # incomplete object
    "{'name': 'test",               # incomplete single-quoted string
])
def test_incomplete_python_needs_more_input(python_parser: Arena, text: str) -> None:
    assert python_parser.parse(text, partial=True).type == ResultType.NEED_MORE_INPUT


@pytest.mark.parametrize("keyword", ["true", "false", "null"])
def test_rejects_json_keywords(python_parser: Arena, keyword: str) -> None:
    assert python_parser.parse(keyword).type == ResultType.FAIL


def test_python_dict_consumes_trailing_whitespace(python_parser: Arena) -> None:
    # unlike json_object, python_dict swallows the whitespace after its closing brace
    r = python_parser.parse("{'a': 1}   ")
    assert r.type == ResultType.SUCCESS
    assert r.end == 11


# --- single-quoted string content --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def single_quoted() -> Arena:
    return build_peg_parser(lambda p: p.sequence([p.literal("'"), p.string_content("'"), p.literal("'"), p.space()]))


@pytest.mark.parametrize("text", ["'hello'", "'it\\'s'", "'say \"hello\"'"])
def test_single_quoted_string(single_quoted: Arena, text: str) -> None:
    r = single_quoted.parse(text)
    assert r.type == ResultType.SUCCESS
    assert r.end == len(text)


def test_single_quoted_string_incomplete(single_quoted: Arena) -> None:
    assert single_quoted.parse("'hello", partial=True).type == ResultType.NEED_MORE_INPUT


# --- json() with a pre-registered flexible json-string ----------------------------------------------------------

def _flexible_json() -> Arena:
    def build(p: Builder) -> P:
        p.rule("json-string", lambda: p.choice([p.double_quoted_string(), p.single_quoted_string()]))
        return p.json()

    return build_peg_parser(build)


def test_json_rejects_single_quotes_by_default() -> None:
    assert build_peg_parser(lambda p: p.json()).parse("{'name': 'test'}").type == ResultType.FAIL


@pytest.mark.parametrize("text", [
    "{'name': 'test'}",
    '{"name": "test"}',
    "{\"name\": 'test', 'value': \"hello\"}",
    "{ 'obj' : { 'something': 1, 'other \"something\"' : 'foo\\'s bar' } }",
])
def test_json_with_flexible_string_rule(text: str) -> None:
    r = _flexible_json().parse(text)
    assert r.type == ResultType.SUCCESS
    assert r.end == len(text)


def test_pre_registered_rule_is_reused_not_replaced() -> None:
    arena = _flexible_json()
    rules = [n.rule for n in arena.parse("{'a': 'b'}").walk()]
    assert rules.count("json-string") == 2
    assert "single-quoted-string" in rules
