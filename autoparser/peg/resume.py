"""Extending a partial parse when more input arrives, without parsing again from the start.

A streaming server parses the output after every token. Re-parsing the whole prefix each time (what llama.cpp
does) costs O(n) per token, O(n^2) per answer. Most of the time, though, the new token only lengthens the
open-ended scan the previous parse stopped in: the reasoning or content text before the next marker, or the
body of a JSON string; or it lengthens a marker the text ends inside (`<tool_ca` + `ll>`). The engine records
every decision that depended on where the input ended (`ParseResult.observed`). When each of them would be
taken the same way on the longer text, the parse of the longer text is provably the same parse with every AST
node still open extended to the new end:

- every other decision looked only at text before the old end, which has not changed;
- a scan runs into the new end again, provided the new text holds no delimiter (nor the start of one at its
  very end) for an `until`, no quote, cut or invalid escape, or undecodable byte for a string body;
- a literal cut off by the end is still cut off if the text from it is still a proper prefix of it, and an
  `until` that stopped before a cut-off delimiter still stops there if the text from there is still a proper
  prefix of a delimiter (nothing before it can start one: that was checked against the shorter text);
- NEED_MORE_INPUT then unwinds through the same parents as before (sequences stop, choices return it, rules
  record a partial node), which depends on the result type only, never on the end position.

A string body also stops, with NEED_MORE_INPUT, before an escape cut off by the end (`\\`, `\\u00`): the parse
of text ending so is the parse of the text before the escape, which `extend_before_cut_escape` extends to.

`Resumption.extend` checks only the text added since the last check (plus a delimiter's length before it, or
the marker so far), so a stream costs O(total length) plus O(depth of the open nodes) per token. Anything else
(a number or a space run cut by the end, `end` matching, undecodable bytes) makes `resumption` return None,
and the caller parses from the start as before.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING

from autoparser.peg import nodes as N
from autoparser.peg.ast import Ast, AstId, AstNode
from autoparser.peg.engine import (
    CUT_ESCAPE,
    OBS_DROPPED,
    OBS_LITERAL,
    OBS_OTHER,
    OBS_STRING,
    OBS_UNTIL,
    OBS_UNTIL_CUT,
    ParseResult,
    ResultType,
    cut_delimiter_pattern,
    has_escaped_bytes,
    string_body_regex,
)
from autoparser.peg.utf8 import ESCAPED_RANGE

if TYPE_CHECKING:
    from autoparser.peg.arena import Arena

__all__ = ["Resumption", "Stops", "ends_inside_marker", "resumption", "until_check"]

# check(window) -> whether a decision taken at the end of the checked text is taken the same way at the end of
# the longer text. For a scan that ran into the end, `window` is the new text preceded by the last characters
# of the checked text the scan could still stop on (a delimiter's length minus one for `until`, none for a
# string body, which the checked text left at a token boundary); for a cut-off literal or delimiter, the text
# from where it starts (shorter than it). So a check costs O(lookback + new text).
Check = Callable[[str], bool]


# stops(text) -> a match where `text` holds a character after which the check may answer otherwise, None when
# the check of (seen + text) passes whatever `seen` is, once the check of the text before it passed: the one
# C-level scan a streamed token needs in the common case (chat/stream.py's fast path).
Stops = Callable[[str], re.Match[str] | None]

@cache
def until_stops(delimiters: tuple[str, ...]) -> Stops:
    """For an `until` scan: a delimiter's first character. Once a check passed, no delimiter and no cut-off one
    starts in the text it checked (a cut-off one would have failed it, a longer one cannot end before the
    window does), so text without such a character starts none either."""
    firsts = sorted({re.escape(d[0]) for d in delimiters if d})
    # (and an undecodable byte, which ends every scan)
    return re.compile("[" + "".join(firsts) + ESCAPED_RANGE + "]").search


@cache
def string_stops(delimiter: str) -> Stops:
    """For a JSON string body: the delimiter, a backslash (an escape, maybe cut) or an undecodable byte; any
    other character is a plain one the body takes."""
    return re.compile("[" + re.escape(delimiter) + "\\\\" + ESCAPED_RANGE + "]").search


@cache
def until_check(delimiters: tuple[str, ...]) -> tuple[Check, int]:
    usable = sorted({d for d in delimiters if d}, key=len)
    if not usable:
        return (lambda window: True), 0
    # The scan stops at a delimiter, and also before a delimiter cut off by the end of the input (a proper
    # prefix of one ending the text). None lies wholly inside the lookback, or the scan would have stopped
    # there already. Cheapest first, as a check runs per streamed token: both a delimiter and a cut-off one begin
    # with a delimiter's first character, and most windows hold none (one character-class scan settles
    # them); then a delimiter anywhere; then a proper prefix of one ending the window, looked for only where
    # it can start (an alternation of every prefix tried at every position costs several times more).
    starts = re.compile("[" + "".join(sorted({re.escape(d[0]) for d in usable})) + "]").search
    found = re.compile("|".join(re.escape(d) for d in usable)).search
    cut_source = cut_delimiter_pattern(usable)
    cut = re.compile(cut_source).search if cut_source else None
    lookback = len(usable[-1]) - 1

    def check(window: str) -> bool:
        if starts(window) is None:
            return True
        if found(window) is not None:
            return False
        return cut is None or cut(window, max(0, len(window) - lookback)) is None

    return check, lookback


@cache
def _string_check(delimiter: str) -> Check:
    # What the engine's string body consumes without stopping: plain characters and complete escapes. A cut
    # escape, an invalid one, the delimiter or an undecodable byte ends the check.
    body = string_body_regex(delimiter).fullmatch

    def check(window: str) -> bool:
        return body(window) is not None

    return check


@cache
def _literal_check(literal: str) -> Check:
    def check(window: str) -> bool:  # the text from the literal on: still cut off inside it
        return len(window) < len(literal) and literal.startswith(window)

    return check


@cache
def _cut_check(delimiters: tuple[str, ...]) -> Check:
    cut = re.compile(cut_delimiter_pattern(d for d in delimiters if d)).fullmatch

    def check(window: str) -> bool:  # the text from where the scan stopped: still a cut-off delimiter
        return cut(window) is not None

    return check


_ALL = sys.maxsize  # a watch that keeps its whole window (a marker so far: shorter than the marker)


class _Watch:
    """One end-of-input decision to take again on longer text: `check(seen + new text)`, keeping the last
    `keep` characters of that window for the next check (none, some, or `_ALL`). `string`: the decision is a
    JSON string body's scan running into the end (see Resumption.extend_before_cut_escape)."""

    __slots__ = ("check", "keep", "seen", "stops", "string")

    def __init__(self, check: Check, keep: int, seen: str, *, string: bool = False,
                 stops: Stops | None = None) -> None:
        self.check = check
        self.keep = keep
        self.seen = seen
        self.string = string
        self.stops = stops


class Resumption:
    """How to extend one partial parse result. Stateful: it remembers how far the text has been checked and
    the few characters the check of its end-of-input decision looks back at, so a check never needs the whole
    text. (`_JointResumption`: several such decisions.)"""

    __slots__ = ("base", "check", "checked", "keep", "seen", "spine", "stops", "string")

    def __init__(self, base: ParseResult, watch: _Watch, spine: tuple[AstId, ...]) -> None:
        self.base = base
        # the watch is unpacked into slots: extend() runs once per token
        self.check, self.keep, self.seen, self.string = watch.check, watch.keep, watch.seen, watch.string
        # None, or the scan that tells a piece `extend` surely takes (see `Stops`): its search finds nothing
        self.stops = watch.stops
        self.spine = spine  # the open (partial) AST nodes, outermost first
        self.checked = len(base.text)

    def extend(self, piece: str) -> bool:
        """Whether the parse of the checked text + `piece` is this parse with its open nodes extended.
        Looks at `piece` (and the lookback) only; on success the longer text becomes the checked one."""
        if not piece:
            return True
        if not piece.isascii() and has_escaped_bytes(piece):
            return False
        window = self.seen + piece
        if not self.check(window):
            return False
        if self.keep:
            self.seen = window[-self.keep:]
        self.checked += len(piece)
        return True

    def extend_before_cut_escape(self, piece: str) -> int:
        """For `piece` ending inside a JSON escape (`\\`, `\\u12`) of the string body this parse scans: extend
        over the text before the escape and return the escape's length; else 0, and nothing changes.

        The engine's string body stops before an incomplete escape with NEED_MORE_INPUT, as it stops at the end
        of the text without it; so the parse of the checked text + `piece` is the parse extended up to the
        escape (same result type, end, nodes). The escape is checked with the next piece (pass it again).
        """
        if not self.string:
            return 0
        cut = CUT_ESCAPE.search(piece)
        if cut is None or not self.extend(piece[:cut.start()]):
            return 0
        return len(piece) - cut.start()

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


class _JointResumption(Resumption):
    """Several decisions taken at the end of the input: typically an `until` stopped before a cut-off delimiter
    and the literal of that delimiter, cut off too (`...\n</para`)."""

    __slots__ = ("others",)

    def __init__(self, base: ParseResult, watches: list[_Watch], spine: tuple[AstId, ...]) -> None:
        super().__init__(base, watches[0], spine)
        self.others = watches[1:]
        self.string = False  # a cut escape is taken apart only when the string scan is the one decision
        self.stops = None

    def extend(self, piece: str) -> bool:
        if not piece:
            return True
        others = self.others
        windows = [w.seen + piece for w in others]
        # all checked before the first watch's extend() commits: a failed extension leaves no trace
        if not all(w.check(x) for w, x in zip(others, windows, strict=True)) or not super().extend(piece):
            return False
        for w, x in zip(others, windows, strict=True):
            if w.keep:
                w.seen = x[-w.keep:]
        return True


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


_MARKER_KINDS = frozenset({OBS_LITERAL, OBS_UNTIL_CUT})


def ends_inside_marker(result: ParseResult) -> bool:
    """Whether every end-of-input decision of `result` was a literal or delimiter cut off by the end (cheap:
    whether `resumption` may give a resumption that lasts only as long as that marker, without building it)."""
    decisions = [kind for kind, _, _ in result.observed if kind != OBS_DROPPED]
    return bool(decisions) and all(kind in _MARKER_KINDS for kind in decisions)


def resumption(arena: Arena, result: ParseResult) -> Resumption | None:
    """A Resumption for `result` if it can be extended without re-parsing, else None."""
    text = result.text
    n = len(text)
    if result.type != ResultType.NEED_MORE_INPUT or not result.observed or result.end != n:
        return None
    watches: list[_Watch] = []
    scans = 0
    for kind, pid, at in dict.fromkeys(result.observed):  # a decision taken twice (backtracking) is one
        if kind == OBS_DROPPED:
            continue  # (no decision: the dropped nodes stay dropped while the scan it ran into extends)
        node = arena.parsers[pid] if kind != OBS_OTHER else None
        if kind == OBS_UNTIL and isinstance(node, N.Until):
            check, lookback = until_check(node.delimiters)
        elif kind == OBS_STRING and isinstance(node, N.String):
            # no lookback: the checked text left the body at a token boundary
            watches.append(_Watch(_string_check(node.delimiter), 0, "", string=True,
                                  stops=string_stops(node.delimiter)))
            scans += 1
            continue
        elif kind == OBS_LITERAL and isinstance(node, N.Literal):
            watches.append(_Watch(_literal_check(node.literal), _ALL, text[at:]))
            continue
        elif kind == OBS_UNTIL_CUT and isinstance(node, N.Until):
            watches.append(_Watch(_cut_check(node.delimiters), _ALL, text[at:]))
            continue
        else:
            return None
        # a scan: what precedes its start cannot be part of a delimiter that stops it
        watches.append(_Watch(check, lookback, text[max(at, n - lookback):] if lookback else "",
                              stops=until_stops(node.delimiters)))
        scans += 1
    if not watches or scans > 1 or has_escaped_bytes(text):
        return None
    spine = open_spine(result)
    if spine is None:
        return None
    return Resumption(result, watches[0], spine) if len(watches) == 1 else _JointResumption(result, watches, spine)
