"""Tag extraction with small throw-away parsers: how the analyzer locates markers in rendered templates.

Port of the C++ `tagged_peg_parser`: parse, then collect `tag -> text` of every tagged AST node (pre-order,
later visits overwrite earlier ones, raw text). A missing tag reads as "".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from autoparser.peg.arena import Arena
from autoparser.peg.builder import Builder, Operand, build_peg_parser
from autoparser.peg.engine import ParseResult


@dataclass(frozen=True)
class TagParseResult:
    result: ParseResult
    tags: dict[str, str]

    @property
    def success(self) -> bool:
        return self.result.success

    def get(self, tag: str) -> str:
        return self.tags.get(tag, "")


class TaggedParser:
    def __init__(self, arena: Arena) -> None:
        self.arena = arena

    def parse_and_extract(self, text: str, *, partial: bool = False, start: int = 0) -> TagParseResult:
        r = self.arena.parse(text, partial=partial, start=start)
        return TagParseResult(r, r.tags() if not r.fail else {})

    def parse_anywhere_and_extract(self, text: str) -> TagParseResult:
        """First successful (strict) parse starting at 0, 1, 2, ...; else the attempt at the last position."""
        if not text:
            return self.parse_and_extract(text)
        last: TagParseResult | None = None
        for i in range(len(text)):
            last = self.parse_and_extract(text, start=i)
            if last.success:
                return last
        assert last is not None
        return last


def build_tagged_peg_parser(fn: Callable[[Builder], Operand]) -> TaggedParser:
    return TaggedParser(build_peg_parser(fn))
