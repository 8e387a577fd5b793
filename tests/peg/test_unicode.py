"""Port of llama.cpp tests/peg-parser/test-unicode.cpp: multi-byte, truncated and malformed UTF-8.

The C++ feeds raw bytes and compares byte offsets. Here every input is passed as `bytes` (the engine decodes
it with surrogateescape, one character per undecodable byte) and the matched span is encoded back the same
way, so the expectations below are the C++ byte strings, unchanged.
"""

from __future__ import annotations

import pytest

from autoparser.peg import Arena, ParseResult, ResultType, build_peg_parser

S, F, M = ResultType.SUCCESS, ResultType.FAIL, ResultType.NEED_MORE_INPUT


def matched(r: ParseResult, trim_end: int = 0) -> bytes:
    """The matched span as the C++ sees it: input bytes [start, end - trim_end)."""
    return r.text[r.start:r.end - trim_end].encode("utf-8", "surrogateescape")


def check(parser: Arena, data: bytes, expected_text: bytes, expected: ResultType, *, partial: bool) -> None:
    r = parser.parse(data, partial=partial)
    assert r.type == expected
    if r.type != ResultType.FAIL:
        assert matched(r) == expected_text


# --- any ---------------------------------------------------------------------------------------------------------

ANY_CASES = [
    # valid UTF-8
    (b"Hello", b"Hello", S),
    (b"Caf\xc3\xa9", b"Caf\xc3\xa9", S),
    (b"\xe4\xbd\xa0\xe5\xa5\xbd", b"\xe4\xbd\xa0\xe5\xa5\xbd", S),
    (b"\xf0\x9f\x9a\x80", b"\xf0\x9f\x9a\x80", S),
    # truncated at the end: the matched prefix stops before the partial character
    (b"Caf\xc3", b"Caf", M),
    (b"\xe4\xbd", b"", M),
    (b"\xf0\x9f\x9a", b"", M),
    # malformed
    (b"\xff\xfe", b"", F),
    (b"Hello\x80World", b"Hello", F),
    (b"\xc3\x28", b"", F),
]


@pytest.mark.parametrize(("data", "expected_text", "expected"), ANY_CASES, ids=[repr(c[0]) for c in ANY_CASES])
def test_any(data: bytes, expected_text: bytes, expected: ResultType) -> None:
    parser = build_peg_parser(lambda p: p.sequence([p.one_or_more(p.any()), p.end()]))
    check(parser, data, expected_text, expected, partial=True)


# --- char classes ----------------------------------------------------------------------------------------------

CJK_CASES = [
    (b"\xe4\xb8\x80", b"\xe4\xb8\x80", S),  # U+4E00
    (b"\xe4\xbd\xa0", b"\xe4\xbd\xa0", S),  # U+4F60
    (b"\xe5\xa5\xbd", b"\xe5\xa5\xbd", S),  # U+597D
    (b"\xe9\xbf\xbf", b"\xe9\xbf\xbf", S),  # U+9FFF
    (b"a", b"", F),
    (b"\xe4\xb7\xbf", b"", F),  # U+4DFF, before the range
    (b"\xea\x80\x80", b"", F),  # U+A000, after the range
    (b"\xe4\xb8", b"", M),      # truncated U+4E00
    (b"\xe5\xa5", b"", M),      # truncated U+597D
]

EMOTICON_CASES = [
    (b"\xf0\x9f\x98\x80", b"\xf0\x9f\x98\x80", S),  # U+1F600
    (b"\xf0\x9f\x98\x81", b"\xf0\x9f\x98\x81", S),  # U+1F601
    (b"\xf0\x9f\x99\x8f", b"\xf0\x9f\x99\x8f", S),  # U+1F64F
    (b"\xf0\x9f\x97\xbf", b"", F),  # U+1F5FF
    (b"\xf0\x9f\x99\x90", b"", F),  # U+1F650
    (b"\xf0\x9f\x9a\x80", b"", F),  # U+1F680
    (b"\xf0\x9f\x98", b"", M),
    (b"\xf0\x9f", b"", M),
]

MIXED_CASES = [
    (b"\xe4\xb8\x80", b"\xe4\xb8\x80", S),
    (b"\xe4\xbd\xa0", b"\xe4\xbd\xa0", S),
    (b"\xf0\x9f\x98\x80", b"\xf0\x9f\x98\x80", S),
    (b"5", b"5", S),
    (b"a", b"", F),
    (b"\xf0\x9f\x9a\x80", b"", F),
    (b"\xe4\xb8", b"", M),
    (b"\xf0\x9f\x98", b"", M),
]


@pytest.mark.parametrize(("data", "expected_text", "expected"), CJK_CASES, ids=[repr(c[0]) for c in CJK_CASES])
def test_chars_cjk_range(data: bytes, expected_text: bytes, expected: ResultType) -> None:
    parser = build_peg_parser(lambda p: p.sequence([p.chars(r"[\u4E00-\u9FFF]"), p.end()]))
    check(parser, data, expected_text, expected, partial=True)


@pytest.mark.parametrize(("data", "expected_text", "expected"), EMOTICON_CASES,
                         ids=[repr(c[0]) for c in EMOTICON_CASES])
def test_chars_emoticon_range(data: bytes, expected_text: bytes, expected: ResultType) -> None:
    parser = build_peg_parser(lambda p: p.sequence([p.chars(r"[\U0001F600-\U0001F64F]"), p.end()]))
    check(parser, data, expected_text, expected, partial=True)


@pytest.mark.parametrize(("data", "expected_text", "expected"), MIXED_CASES, ids=[repr(c[0]) for c in MIXED_CASES])
def test_chars_mixed_ranges(data: bytes, expected_text: bytes, expected: ResultType) -> None:
    parser = build_peg_parser(lambda p: p.sequence([p.chars(r"[\u4E00-\u9FFF\U0001F600-\U0001F64F0-9]"), p.end()]))
    check(parser, data, expected_text, expected, partial=True)


def test_chars_on_str_input_counts_code_points() -> None:
    # The same class on a Python str: offsets are code points (3 characters, 9 UTF-8 bytes in the C++).
    r = build_peg_parser(lambda p: p.chars(r"[\u4E00-\u9FFF]")).parse("你好世x")
    assert r.type == S
    assert r.end == 3


# --- until -------------------------------------------------------------------------------------------------------

UNTIL_UNICODE = [
    (b"\xe4\xbd\xa0\xe5\xa5\xbd</tag>", b"\xe4\xbd\xa0\xe5\xa5\xbd", S),
    (b"\xf0\x9f\x98\x80</tag>", b"\xf0\x9f\x98\x80", S),
    (b"Hello \xe4\xb8\x96\xe7\x95\x8c!</tag>", b"Hello \xe4\xb8\x96\xe7\x95\x8c!", S),
]

UNTIL_TRUNCATED = [
    (b"content\xf0\x9f\x98", b"content", M),  # the truncated tail is left out
    (b"hello\xe4\xb8", b"hello", M),
    (b"\xe4\xbd\xa0\xe5\xa5\xbd", b"\xe4\xbd\xa0\xe5\xa5\xbd", M),  # no delimiter yet: more may come
]


@pytest.mark.parametrize(("data", "expected_text", "expected"), UNTIL_UNICODE,
                         ids=[repr(c[0]) for c in UNTIL_UNICODE])
def test_until_unicode_content(data: bytes, expected_text: bytes, expected: ResultType) -> None:
    check(build_peg_parser(lambda p: p.until("</tag>")), data, expected_text, expected, partial=False)


@pytest.mark.parametrize(("data", "expected_text", "expected"), UNTIL_TRUNCATED,
                         ids=[repr(c[0]) for c in UNTIL_TRUNCATED])
def test_until_incomplete_utf8_at_end(data: bytes, expected_text: bytes, expected: ResultType) -> None:
    check(build_peg_parser(lambda p: p.until("</tag>")), data, expected_text, expected, partial=True)


MALFORMED_UNTIL = [
    (b"Hello\xff\xfe</tag>", b"Hello\xff\xfe", "Hello\ufffd\ufffd"),
    (b"Hello\x80World</tag>", b"Hello\x80World", "Hello\ufffdWorld"),
    # bad continuation: the lead byte is one run, '(' survives
    (b"\xc3\x28</tag>", b"\xc3\x28", "\ufffd("),
    # two good bytes of a 3-byte sequence then a bad one: the prefix is one run, 'A' is kept
    (b"\xe4\xb8A</tag>", b"\xe4\xb8A", "\ufffdA"),
    (b"\xe4\xb8</tag>", b"\xe4\xb8", "\ufffd"),
    # truncated sequence at the end of a complete input: one run
    (b"Hello\xe4\xb8", b"Hello\xe4\xb8", "Hello\ufffd"),
    # valid multi-byte content around the bad byte is untouched
    (b"\xe4\xbd\xa0\xff\xe5\xa5\xbd</tag>", b"\xe4\xbd\xa0\xff\xe5\xa5\xbd", "\u4f60\ufffd\u597d"),
]


@pytest.mark.parametrize(("data", "raw", "sanitized"), MALFORMED_UNTIL, ids=[repr(c[0]) for c in MALFORMED_UNTIL])
def test_until_malformed_utf8_kept_raw_and_sanitized(data: bytes, raw: bytes, sanitized: str) -> None:
    parser = build_peg_parser(lambda p: p.tag("body", p.until("</tag>")) + p.optional(p.literal("</tag>")))
    r = parser.parse(data)
    assert r.type == S
    node = r.ast.get(r.nodes[0])
    assert node.tag == "body"
    assert node.text.encode("utf-8", "surrogateescape") == raw
    assert node.sanitized_text() == sanitized


def test_until_malformed_utf8_recorded_once_despite_backtracking() -> None:
    # The failed first alternative and the lookahead both scan the bad byte; the result records it once.
    parser = build_peg_parser(lambda p: (p.until("<a>") + p.literal("<a>"))
                              | (p.peek(p.until("<b>")) + p.until("<b>") + p.literal("<b>")))
    r = parser.parse(b"x\xffy<b>")
    assert r.type == S
    assert len(r.invalid_utf8) == 1
    assert r.invalid_utf8[0][0] == 1  # (position, length)
    assert r.invalid_utf8 == ((1, 1),)


# --- string content ----------------------------------------------------------------------------------------------

STRING_VALID = [
    (b'Hello World"', b"Hello World"),
    (b'Caf\xc3\xa9"', b"Caf\xc3\xa9"),
    (b'\xe4\xbd\xa0\xe5\xa5\xbd"', b"\xe4\xbd\xa0\xe5\xa5\xbd"),
    (b'\xf0\x9f\x98\x80"', b"\xf0\x9f\x98\x80"),
    (b'Hello \xe4\xb8\x96\xe7\x95\x8c!"', b"Hello \xe4\xb8\x96\xe7\x95\x8c!"),
]

STRING_ESCAPES = [
    (b'Hello\\u0041"', b"Hello\\u0041"),
    (b'\xe4\xbd\xa0\\n\xe5\xa5\xbd"', b"\xe4\xbd\xa0\\n\xe5\xa5\xbd"),
    (b'\xe4\xbd\xa0\\"\xe5\xa5\xbd"', b'\xe4\xbd\xa0\\"\xe5\xa5\xbd'),
]


@pytest.mark.parametrize(("data", "content"), STRING_VALID + STRING_ESCAPES,
                         ids=[repr(c[0]) for c in STRING_VALID + STRING_ESCAPES])
def test_string_content_valid(data: bytes, content: bytes) -> None:
    parser = build_peg_parser(lambda p: p.sequence([p.string_content('"'), p.literal('"')]))
    r = parser.parse(data)
    assert r.type == S
    assert matched(r, trim_end=1) == content  # the closing quote is excluded


STRING_INCOMPLETE = [
    (b"Caf\xc3", b"Caf"),
    (b"Hello\xe4\xb8", b"Hello"),
    (b"Text\xf0\x9f\x98", b"Text"),
    (b"\xe4\xbd", b""),
]


@pytest.mark.parametrize(("data", "prefix"), STRING_INCOMPLETE, ids=[repr(c[0]) for c in STRING_INCOMPLETE])
def test_string_content_incomplete_utf8(data: bytes, prefix: bytes) -> None:
    r = build_peg_parser(lambda p: p.string_content('"')).parse(data, partial=True)
    assert r.type == M
    assert matched(r) == prefix


@pytest.mark.parametrize("data", [b"Hello\xff\xfe", b"Hello\x80World", b"\xc3\x28"])
def test_string_content_malformed_utf8_fails(data: bytes) -> None:
    assert build_peg_parser(lambda p: p.string_content('"')).parse(data).type == F


# --- literals cut inside a multi-byte character ------------------------------------------------------------------

MARKER = "<｜tool▁calls▁begin｜>"  # DeepSeek-style marker: fullwidth bar and U+2581 are 3 bytes each


def test_literal_cut_inside_a_multibyte_character_needs_more_input() -> None:
    # The C++ compares literals byte by byte: every byte prefix of the marker is a partial match in partial
    # mode (and a failure in strict mode). End offsets: C++ bytes -> characters of the decoded prefix.
    parser = build_peg_parser(lambda p: p.literal(MARKER))
    data = MARKER.encode()
    for k in range(len(data)):
        r = parser.parse(data[:k], partial=True)
        assert r.type == M, k
        assert r.end == len(data[:k].decode("utf-8", "surrogateescape"))
        assert parser.parse(data[:k]).type == F
    assert parser.parse(data).type == S


def test_literal_cut_then_wrong_byte_fails() -> None:
    parser = build_peg_parser(lambda p: p.literal("é"))
    assert parser.parse(b"\xc3", partial=True).type == M
    assert parser.parse(b"\xc3(", partial=True).type == F
    assert parser.parse(b"\xc4", partial=True).type == F   # a different lead byte
    assert parser.parse(b"\xc3\xa9", partial=True).type == S


def test_text_before_cut_marker_is_content() -> None:
    parser = build_peg_parser(lambda p: p.tag("content", p.until(MARKER)) + p.literal(MARKER))
    cut = b"Hello " + MARKER.encode()[:5]
    r = parser.parse(cut, partial=True)
    assert r.type == M
    assert r.tags() == {"content": "Hello "}
