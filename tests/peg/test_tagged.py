"""Tag extraction (`tagged_peg_parser`) and invalid UTF-8 in tagged spans.

Ports the "tagged peg parser" group of llama.cpp tests/test-chat-peg-parser.cpp, and the engine-level half of its
"invalid utf8" group: the C++ runs the chat mapper over `reasoning`/`content` tags; here the same grammar is
built with plain tags and the sanitised text of the tagged AST nodes is checked (what the mapper copies).
"""

from __future__ import annotations

from autoparser.peg import Builder, P, ResultType
from autoparser.peg.tagged import build_tagged_peg_parser


def raw(data: bytes) -> str:
    """Raw model bytes as the engine sees them: each undecodable byte becomes one surrogate escape."""
    return data.decode("utf-8", "surrogateescape")


def test_basic_tag_extraction() -> None:
    parser = build_tagged_peg_parser(lambda p: p.tag("greeting", p.until(" ")) + " " + p.tag("name", p.rest()) + p.end())
    r = parser.parse_and_extract("Hello World")
    assert r.success
    assert r.tags == {"greeting": "Hello", "name": "World"}


def test_duplicate_tags_overwrite() -> None:
    parser = build_tagged_peg_parser(lambda p: p.tag("item", p.until(",")) + "," + p.tag("item", p.rest()) + p.end())
    r = parser.parse_and_extract("first,second")
    assert r.success
    assert r.tags == {"item": "second"}


def test_no_tags_extracted() -> None:
    r = build_tagged_peg_parser(lambda p: p.rest() + p.end()).parse_and_extract("Hello")
    assert r.success
    assert r.tags == {}
    assert r.get("anything") == ""


def test_structured_extraction() -> None:
    def build(p: Builder) -> P:
        header = p.tag("header", p.until("\n"))
        body = p.tag("body", p.rest())
        return header + "\n" + body + p.end()

    r = build_tagged_peg_parser(build).parse_and_extract("Title\nBody content here")
    assert r.success
    assert r.tags == {"header": "Title", "body": "Body content here"}


def test_partial_parse() -> None:
    parser = build_tagged_peg_parser(lambda p: p.tag("prefix", p.until(":")) + ":" + p.tag("value", p.rest()) + p.end())
    r = parser.parse_and_extract("key:val", partial=True)
    assert not r.result.fail
    assert r.result.type == ResultType.NEED_MORE_INPUT  # rest() always waits for more on partial input
    assert r.tags == {"prefix": "key", "value": "val"}


def _fun_name_parser(p: Builder) -> P:
    return p.choice([p.literal("{"), p.literal(":")]) + p.space() + p.literal('"') + p.atomic(p.literal("fun_name"))


def test_find_in_the_middle() -> None:
    tpl = ('This is a very long jinja template string. We have tools. We will try to call them now: '
           '<tool_call>{ "fun_name" : { "arg" : 1 }</tool_call>')
    r = build_tagged_peg_parser(_fun_name_parser).parse_anywhere_and_extract(tpl)
    assert r.success
    assert r.result.start == tpl.index("{")
    assert r.result.end == tpl.index("fun_name") + len("fun_name")


def test_fail_find_in_the_middle() -> None:
    tpl = ('This is a very long jinja template string. We have tools. We will try to call them now: '
           '<tool_call><fun=fun_name><arg name=arg>1</arg></tool_call>')
    r = build_tagged_peg_parser(_fun_name_parser).parse_anywhere_and_extract(tpl)
    assert r.result.fail
    assert r.tags == {}


def test_find_function_tag_with_name() -> None:
    haystack = ("\n<tool_call>\n<function=foofoo>\n<parameter=first>\nXXXX\n</parameter>\n"
                "<parameter=second>\nYYYY\n</parameter>\n</function>\n</tool_call>\n")
    needle = "foofoo"

    def build(p: Builder) -> P:
        return p.tag("fun_marker", p.choice([
            p.tag("fun_pre", p.literal("<") + p.until_one_of([">", needle])) + p.literal(needle)
            + p.tag("fun_post", p.negate(p.space() + p.literal("<")) + p.until(">") + p.literal(">")) + p.space(),
            p.tag("fun_pre", p.literal("[") + p.until_one_of(["]", needle])) + p.literal(needle)
            + p.tag("fun_post", p.negate(p.space() + p.literal("[") + p.until("]") + p.literal("]")) + p.space()),
        ]))

    r = build_tagged_peg_parser(build).parse_anywhere_and_extract(haystack)
    assert r.success
    assert r.get("fun_pre") == "<function="
    assert r.get("fun_post") == ">"
    assert r.get("fun_marker") == "<function=foofoo>\n"


def test_parse_anywhere_on_empty_input() -> None:
    r = build_tagged_peg_parser(lambda p: p.tag("t", p.rest())).parse_anywhere_and_extract("")
    assert r.success
    assert r.tags == {"t": ""}


def test_parse_anywhere_returns_last_attempt_when_nothing_matches() -> None:
    r = build_tagged_peg_parser(lambda p: p.tag("t", p.literal("zz"))).parse_anywhere_and_extract("abc")
    assert r.result.fail
    assert r.result.start == 2


def test_tags_are_raw_text() -> None:
    parser = build_tagged_peg_parser(lambda p: p.tag("t", p.until("<")) + p.literal("<"))
    r = parser.parse_and_extract(raw(b"a\xffb<"))
    assert r.tags == {"t": "a\udcffb"}


# --- invalid UTF-8 (engine half of the C++ "invalid utf8" group) ------------------------------------------------

def _think_parser(p: Builder) -> P:
    return "<think>" + p.tag("reasoning", p.until("</think>")) + "</think>" + p.tag("content", p.rest()) + p.end()


def _sanitized(result_nodes: list[tuple[str, str]], tag: str) -> str:
    return next(text for t, text in result_nodes if t == tag)


def test_invalid_utf8_replaced_in_reasoning_and_content() -> None:
    r = build_tagged_peg_parser(_think_parser).parse_and_extract(
        raw(b"<think>plan\xff\xfe</think>caf\xc3\xa9 \x80 done"))
    assert r.success
    nodes = [(n.tag, n.sanitized_text()) for n in r.result.walk()]
    assert _sanitized(nodes, "reasoning") == "plan\ufffd\ufffd"
    assert _sanitized(nodes, "content") == "café \ufffd done"
    # C++ byte positions 11, 12, 27 are code points 11, 12, 26 here: "\xC3\xA9" is one character
    assert r.result.invalid_utf8 == ((11, 1), (12, 1), (26, 1))


def test_partial_input_keeps_trailing_incomplete_sequence_out() -> None:
    r = build_tagged_peg_parser(_think_parser).parse_and_extract(raw(b"<think>x</think>a\x80b\xe4\xb8"),
                                                                   partial=True)
    assert not r.result.fail
    nodes = [(n.tag, n.sanitized_text()) for n in r.result.walk()]
    assert _sanitized(nodes, "content") == "a\ufffdb"
