"""Small tagged PEG parsers shared by the analysis phases (C++ `build_tagged_peg_parser` one-offs)."""

from __future__ import annotations

from collections.abc import Callable

from autoparser.peg.builder import Builder, Operand
from autoparser.peg.tagged import TaggedParser, TagParseResult, build_tagged_peg_parser

ParserFn = Callable[[Builder], Operand]


_CACHE: dict[str, TaggedParser] = {}


def parser(key: str, fn: ParserFn) -> TaggedParser:
    """A parser built once per distinct `key` (fn must be fully determined by the key)."""
    p = _CACHE.get(key)
    if p is None:
        if len(_CACHE) > 4096:
            _CACHE.clear()
        p = _CACHE[key] = build_tagged_peg_parser(fn)
    return p


MARKER_START = "<["


def anywhere(p: TaggedParser, text: str, *, starts: str | None = None, literal: str | None = None) -> TagParseResult:
    """First successful parse at position 0, 1, 2, ... (C++ parse_anywhere_and_extract).

    `starts` (the characters a match can begin with) or `literal` (the text a match begins with) let the scan
    skip positions where the parser cannot succeed: same first success, far fewer attempts on long renders.
    The result on failure is a plain failure (callers never read tags of a failed search).
    """
    if starts is None and literal is None:
        return p.parse_anywhere_and_extract(text)
    if literal is not None:
        pos = text.find(literal)
        while pos >= 0:
            res = p.parse_and_extract(text, start=pos)
            if res.success:
                return res
            pos = text.find(literal, pos + 1)
    else:
        assert starts is not None
        for pos, ch in enumerate(text):
            if ch in starts:
                res = p.parse_and_extract(text, start=pos)
                if res.success:
                    return res
    # At the end of the input a parser that must consume a literal or a marker fails: the engine's own
    # failure value, without another scan.
    return p.parse_and_extract(text, start=len(text))


def anchored(p: TaggedParser, text: str) -> TagParseResult:
    return p.parse_and_extract(text)


def last_marker_with_tail(b: Builder) -> Operand:
    """`marker (!marker any)* end`: the last marker of the input and the text after it."""
    return b.marker() + b.zero_or_more(b.negate(b.marker()) + b.any()) + b.end()
