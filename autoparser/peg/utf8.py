"""Code-point view of text that may carry undecodable bytes, and the character-class mini language.

The engine works on `str`. Bytes that are not valid UTF-8 reach it as surrogate escapes (U+DC80..U+DCFF, one
per byte, as `bytes.decode("utf-8", "surrogateescape")` produces). `decode_at` reproduces the C++
`common_parse_utf8_codepoint` on such text: valid characters decode as themselves, and a run of escaped bytes
is classified SUCCESS / INCOMPLETE / INVALID exactly as the C++ classifies the raw bytes. Since each escaped
byte is one character, the C++ byte counts (`invalid_utf8` run lengths) equal our character counts.
"""

from __future__ import annotations

import re

from autoparser.peg.nodes import CharRange

SUCCESS, INCOMPLETE, INVALID = 0, 1, 2

# The surrogate escapes of undecodable bytes, as a character-class range (regexes that stop at such a byte)
ESCAPED_RANGE = "\udc80-\udcff"
ESCAPED_BYTE = re.compile(f"[{ESCAPED_RANGE}]")


def to_text(data: str | bytes) -> str:
    """Input as the engine wants it: bytes are decoded, undecodable bytes kept as surrogate escapes."""
    if isinstance(data, bytes):
        return data.decode("utf-8", "surrogateescape")
    return data


def _escaped_byte(text: str, i: int) -> int:
    """The raw byte value at i if text[i] is a surrogate escape, else -1."""
    o = ord(text[i])
    return o - 0xDC00 if 0xDC80 <= o <= 0xDCFF else -1


def decode_at(text: str, i: int) -> tuple[int, int, int]:
    """(status, codepoint, length) at index i, following the C++ decoder's rules on escaped bytes."""
    n = len(text)
    if i >= n:
        return INCOMPLETE, 0, 0
    c = text[i]
    o = ord(c)
    if not 0xDC80 <= o <= 0xDCFF:
        return SUCCESS, o, 1
    lead = o - 0xDC00
    if not lead & 0x40:  # a continuation byte cannot start a sequence
        return INVALID, 0, 1
    if not lead & 0x20:
        need = 2
    elif not lead & 0x10:
        need = 3
    elif not lead & 0x08:
        need = 4
    else:
        return INVALID, 0, 1
    cp = lead & (0x7F >> need)
    for k in range(1, need):
        if i + k >= n:
            return INCOMPLETE, 0, k
        b = _escaped_byte(text, i + k)
        if b < 0 or (b & 0xC0) != 0x80:
            return INVALID, 0, k
        cp = (cp << 6) | (b & 0x3F)
    # Structurally complete but rejected by Python's decoder (overlong, surrogate, > U+10FFFF): the C++ decoder
    # performs no such checks and accepts it as one code point.
    return SUCCESS, cp, need


def sanitize(text: str, start: int, runs: tuple[tuple[int, int], ...]) -> str:
    """`text` (which begins at absolute position `start`) with each invalid run replaced by one U+FFFD."""
    if not runs:
        return text
    out: list[str] = []
    prev = 0
    for pos, length in runs:
        rel = pos - start
        if rel < prev or rel > len(text):
            continue
        out.append(text[prev:rel])
        out.append("\ufffd")
        prev = rel + length
    out.append(text[prev:])
    return "".join(out)


_HEX = set("0123456789abcdefABCDEF")


def _parse_class_item(s: str, i: int) -> tuple[int, int]:
    """One item of a character class at s[i]: (code point, chars consumed)."""
    c = s[i]
    if c != "\\" or i + 1 >= len(s):
        return ord(c), 1
    e = s[i + 1]
    width = {"x": 2, "u": 4, "U": 8}.get(e)
    if width is not None:
        digits = s[i + 2:i + 2 + width]
        if len(digits) == width and all(d in _HEX for d in digits):
            return int(digits, 16), 2 + width
        return ord(e), 2  # not enough hex digits: the escape stands for the letter itself
    return ord({"n": "\n", "t": "\t", "r": "\r"}.get(e, e)), 2


def parse_char_class(pattern: str) -> tuple[tuple[CharRange, ...], bool]:
    """Ranges and negation of a class such as `[a-z]`, `^0-9`, `[\\u4E00-\\u9FFF]` (brackets optional).

    Like the C++, one leading `[` and one trailing `]` are dropped if present, and a reversed range simply
    never matches. Differs only in that a raw non-ASCII character in the pattern is one code point, where the
    C++ would take its UTF-8 bytes one by one; portable patterns use `\\u` escapes anyway.
    """
    s = pattern[1:] if pattern.startswith("[") else pattern
    if s.endswith("]"):
        s = s[:-1]
    negated = s.startswith("^")
    if negated:
        s = s[1:]
    ranges: list[CharRange] = []
    i = 0
    while i < len(s):
        lo, used = _parse_class_item(s, i)
        i += used
        if i + 1 < len(s) and s[i] == "-":
            hi, used = _parse_class_item(s, i + 1)
            i += 1 + used
            ranges.append(CharRange(lo, hi))
        else:
            ranges.append(CharRange(lo, lo))
    return tuple(ranges), negated
