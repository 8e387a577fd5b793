"""Extending a partial parse when more input arrives, without parsing again from the start.

A streaming server parses the output after every token. Re-parsing the whole prefix each time (what llama.cpp
does) costs O(n) per token, O(n^2) per answer. Most of the time, though, the new token only lengthens the
open-ended scan the previous parse stopped in: the reasoning or content text before the next marker, or the
body of a JSON string. The engine records every decision that depended on where the input ended
(`ParseResult.observed`). When the only such decision was one of those scans running into the end, the parse
of the longer text is provably the same parse with that scan, and every AST node still open around it,
extended to the new end:

- every other decision looked only at text before the old end, which has not changed;
- the scan itself would run into the new end again, provided the new text holds no delimiter (nor the start of
  one at its very end) for an `until`, no quote, cut or invalid escape, or undecodable byte for a string body;
- NEED_MORE_INPUT then unwinds through the same parents as before (sequences stop, choices return it, rules
  record a partial node), which depends on the result type only, never on the end position.

`Resumption.extend` checks only the text added since the last check (plus a delimiter's length before it),
so a stream costs O(total length) plus O(depth of the open nodes) per token. Anything else (a partial marker
at the end, a number or a space run cut by the end, undecodable bytes) makes it return None, and the caller
parses from the start as before.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING

from autoparser.peg import nodes as N
from autoparser.peg.ast import Ast, AstId, AstNode
from autoparser.peg.engine import (
    OBS_STRING,
    OBS_UNTIL,
    ParseResult,
    ResultType,
    cut_delimiter_pattern,
    has_escaped_bytes,
)

if TYPE_CHECKING:
    from autoparser.peg.arena import Arena

__all__ = ["Resumption", "resumption"]

# check(window) -> whether the scan, which ran into the end of the checked text, runs into the end of the longer
# text as well. `window` is the new text preceded by the last characters of the checked text the scan could
# still stop on (a delimiter's length minus one for `until`, none for a string body, which the checked text
# left at a token boundary), so a check costs O(lookback + new text).
Check = Callable[[str], bool]


@cache
def _until_check(delimiters: tuple[str, ...]) -> tuple[Check, int]:
    usable = sorted({d for d in delimiters if d}, key=len)
    if not usable:
        return (lambda window: True), 0
    # The scan stops at a delimiter, and also before a delimiter cut off by the end of the input (a proper
    # prefix of one ending the text): one search finds either. None lies wholly inside the lookback, or the
    # scan would have stopped there already.
    alternatives = [re.escape(d) for d in usable]
    if cut := cut_delimiter_pattern(usable):
        alternatives.append(cut)
    stops = re.compile("|".join(alternatives)).search

    def check(window: str) -> bool:
        return stops(window) is None

    return check, len(usable[-1]) - 1


@cache
def _string_check(delimiter: str) -> tuple[Check, int]:
    # What the engine's string body consumes without stopping: plain characters and complete escapes. A cut
    # escape, an invalid one, the delimiter or an undecodable byte ends the check.
    escapes = "".join(sorted(set(delimiter + "\\/bfnrt")))
    body = re.compile("(?:[^" + re.escape(delimiter) + "\\\\\udc80-\udcff]+|\\\\[" + re.escape(escapes)
                      + "]|\\\\u[0-9a-fA-F]{4})*").fullmatch

    def check(window: str) -> bool:
        return body(window) is not None

    return check, 0


class Resumption:
    """How to extend one partial parse result. Stateful: it remembers how far the text has been checked and
    keeps the last few characters a check looks back at, so a check never needs the whole text."""

    __slots__ = ("base", "check", "checked", "lookback", "spine", "tail")

    def __init__(self, base: ParseResult, check: Check, lookback: int, scan_start: int,
                 spine: tuple[AstId, ...]) -> None:
        self.base = base
        self.check = check
        self.lookback = lookback
        self.spine = spine  # the open (partial) AST nodes, outermost first
        self.checked = len(base.text)
        # the scan's own text only: what precedes it cannot be part of a delimiter that stops it
        self.tail = base.text[max(scan_start, self.checked - lookback):] if lookback else ""

    def extend(self, piece: str) -> bool:
        """Whether the parse of the checked text + `piece` is this parse with its open nodes extended.
        Looks at `piece` (and the lookback) only; on success the longer text becomes the checked one."""
        if not piece:
            return True
        if not piece.isascii() and has_escaped_bytes(piece):
            return False
        window = self.tail + piece
        if not self.check(window):
            return False
        self.checked += len(piece)
        if self.lookback:
            self.tail = window[-self.lookback:]
        return True

    def result(self, text: str) -> ParseResult:
        """The parse result for `text` (the checked text): the open nodes end at its end."""
        base = self.base
        if len(text) == len(base.text):
            return base
        n = len(text)
        nodes = list(base.ast.nodes)
        for nid in self.spine:
            node = nodes[nid]
            nodes[nid] = node._replace(end=n, text=text[node.start:n])
        ast = Ast()
        ast.nodes = nodes
        return ParseResult(base.type, base.start, n, base.nodes, base.invalid_utf8, ast, text,
                           observed=base.observed)


def open_spine(result: ParseResult) -> tuple[AstId, ...] | None:
    """The chain of partial nodes from the top down, or None when a partial node lies off that chain or ends
    elsewhere than the input (then extending it would be guesswork)."""
    ast_nodes = result.ast.nodes
    spine: list[AstId] = []
    ids = result.nodes
    end = len(result.text)
    while ids:
        last: AstNode = ast_nodes[ids[-1]]
        if not last.is_partial:
            break
        if last.end != end:
            return None
        spine.append(last.id)
        ids = last.children
    return tuple(spine)


def resumption(arena: Arena, result: ParseResult) -> Resumption | None:
    """A Resumption for `result` if it can be extended without re-parsing, else None."""
    if result.type != ResultType.NEED_MORE_INPUT or len(result.observed) != 1 or result.end != len(result.text):
        return None
    kind, pid, start = result.observed[0]
    node = arena.parsers[pid] if kind in (OBS_UNTIL, OBS_STRING) else None
    if isinstance(node, N.Until) and kind == OBS_UNTIL:
        check, lookback = _until_check(node.delimiters)
    elif isinstance(node, N.String) and kind == OBS_STRING:
        check, lookback = _string_check(node.delimiter)
    else:
        return None
    if has_escaped_bytes(result.text):
        return None
    spine = open_spine(result)
    if spine is None:
        return None
    return Resumption(result, check, lookback, start, spine)
