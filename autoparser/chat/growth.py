"""How a mapped message grows while only the text of a parse's open nodes grows (streaming).

StreamParser extends a partial parse by lengthening its chain of open nodes (peg/resume.py). Where that chain
feeds one message field through a text-local rule of the generic mapper, the message grows by an append and
the tree need not be mapped again; this module says when that holds and what is appended. It reads the
mapper's public state only (`ChatPegMapper.filling`, `ACTING_TAGS`).
"""

from __future__ import annotations

import re

from autoparser.chat.mapper import ACTING_TAGS, ChatPegMapper, escape_inner, map_accounted, rstrip_c
from autoparser.chat.tags import CONTENT, REASONING, TOOL_ARG_STRING_VALUE, TOOL_ARGS
from autoparser.peg import Ast, AstNode, ParseResult
from autoparser.peg.ast import AstId
from autoparser.types import ChatFormat, ChatMessage, MessageDelta, ToolCall

__all__ = ["FieldGrowth", "feeds_no_field", "held_tail", "map_growing", "map_growing_accounted", "run_at_end"]

# What a held text ends with that may still turn out to be formatting: whitespace, and special tokens
# (`<|END_OF_TURN_TOKEN|>`, `<｜end▁of▁sentence｜>`; any `<...>` without whitespace in it) or one still being
# written (`<|END_OF`) (a superset of what the recovery drops at an output's end: recovery/coverage.py).
_HELD_TAIL = re.compile(r"(?:\s|<[^\s<>]{0,48}>)*(?:<[^\s<>]{0,48})?\Z")


def held_tail(text: str) -> int:
    """How many characters at the end of `text` a stream holds back (shown once text follows them, or the output
    is complete): whitespace, special tokens, a special token being written; and again at the end of what
    stays (`a<|end|><|be`: the cut `<|be` and then `<|end|>`), so that what shows holds nothing it would hold."""
    end = len(text)
    while True:
        if "<" not in text[max(0, end - 50):end]:
            kept = len(rstrip_c(text[:end]))
        else:
            kept = run_at_end(_HELD_TAIL, text, end, 50)
        if kept == end:
            return len(text) - end
        end = kept


def run_at_end(run: re.Pattern[str], text: str, end: int, longest: int) -> int:
    """Where the run `run` matches at the end of `text[:end]` begins (`run` is a repetition of pieces at most
    `longest` long, anchored `\\Z`, matching empty text): searched in a window at the end, widened while the
    run may begin before it. (A search over the whole text tries every position: this runs on hot paths.)"""
    window = 4 * longest
    while True:
        start = max(0, end - window)
        at = run.search(text, start, end).start()  # type: ignore[union-attr]
        if start == 0 or at - start > longest:  # (a run reaching further back would begin before `at`: a piece
            return at  # cut by the window's start is no longer than `longest`)
        window *= 4


class FieldGrowth:
    """How the generic mapper's message grows while only the text of a parse's open nodes grows.

    StreamParser extends a partial parse by lengthening its chain of open nodes (peg/resume.py). When that
    chain feeds exactly one message field through text-local mapping rules, the new message is the old one
    with that field extended by `added(piece)`, and the tree need not be mapped again. `field` is
    "content", "reasoning_content" or "arguments" (of tool call `call_index`, the last one); or "" when
    the chain feeds no field at all (no tag the mapper acts on: a marker being completed, say), so that
    the message stays as it is.
    """

    __slots__ = ("_escaped", "_holds_tokens", "_trailing_space", "call_index", "field", "plain", "stop_marker")

    def __init__(self, field: str, *, call_index: int = -1, escaped: bool = False,
                 trailing_space: str = "", hold_space: bool = False, stop_marker: str = "") -> None:
        self.field = field
        self.call_index = call_index
        # a marker the field's text may not grow by as the parse reads it (a default stream reads a reasoning
        # block inside the content: recovery/stream.py): a piece that writes it, or begins to, is mapped again.
        # (Where the field ends with the marker's beginning, the stream maps every piece: no growth is made.)
        self.stop_marker = stop_marker
        self._escaped = escaped
        # content and reasoning are appended as they are, or, `hold_space`, without what they end with that may
        # be formatting (`held_tail`: shown once something follows it); JSON arguments without trailing whitespace
        self.plain = field in ("content", "reasoning_content") and not hold_space
        self._trailing_space = trailing_space
        self._holds_tokens = hold_space

    def stopped_by(self, piece: str) -> bool:
        """Whether `piece` writes `stop_marker` or ends with its beginning."""
        marker = self.stop_marker
        at = piece.find(marker[0])
        while at >= 0:
            rest = piece[at:]
            if rest.startswith(marker) or marker.startswith(rest):
                return True
            at = piece.find(marker[0], at + 1)
        return False

    def added(self, piece: str) -> str:
        """What the field gains when the open node's text gains `piece` (which holds no undecodable bytes)."""
        if self.plain:
            return piece
        if self._escaped:
            # a string value: escaped character by character, so escaping the piece escapes the suffix
            return escape_inner(piece)
        if not self.field:
            return ""
        # JSON arguments (and held text) are the node text right-stripped: trailing whitespace shows once
        # something follows it
        s = self._trailing_space + piece
        visible = s[:len(s) - held_tail(s)] if self._holds_tokens else rstrip_c(s)
        self._trailing_space = s[len(visible):]
        return visible

    def delta(self, added: str) -> MessageDelta:
        """The delta record `compute_deltas` gives when only this field gained `added` (not empty)."""
        # positional arguments (reasoning, content, call index, call): one of these is built per streamed token,
        # and keyword arguments cost a third more
        field = self.field
        if field == "content":
            return MessageDelta("", added)
        if field == "reasoning_content":
            return MessageDelta(added)
        return MessageDelta("", "", self.call_index, ToolCall("", added))

    def grown(self, msg: ChatMessage, extra: str) -> ChatMessage:
        """`msg` with this field extended by `extra` (what `added` returned, joined)."""
        if not extra:
            return msg
        if self.field == "content":
            return ChatMessage(msg.role, msg.content + extra, msg.reasoning_content, msg.tool_calls, msg.diagnostics)
        if self.field == "reasoning_content":
            return ChatMessage(msg.role, msg.content, msg.reasoning_content + extra, msg.tool_calls, msg.diagnostics)
        calls = list(msg.tool_calls)
        call = calls[self.call_index]
        calls[self.call_index] = ToolCall(call.name, call.arguments + extra, call.id)
        return ChatMessage(msg.role, msg.content, msg.reasoning_content, tuple(calls), msg.diagnostics)


def feeds_no_field(result: ParseResult, spine: tuple[AstId, ...], fmt: ChatFormat | str) -> bool:
    """Whether the message `fmt`'s mapper makes of `result` stays the same while the open nodes `spine` grow:
    the generic mapper reads only the nodes it acts on, and none is on the spine."""
    if ChatFormat.of(fmt) in (ChatFormat.PEG_GEMMA4, ChatFormat.PEG_MINIMAX_M3):
        return False  # these read rules and untagged nodes too
    return not _acting_on(result.ast, spine)


def _acting_on(ast: Ast, spine: tuple[AstId, ...]) -> list[AstNode]:
    """The nodes of `spine` the generic mapper acts on, outermost first."""
    return [ast.nodes[i] for i in spine if ast.nodes[i].tag in ACTING_TAGS]


def map_growing(result: ParseResult, spine: tuple[AstId, ...],
                fmt: ChatFormat | str = ChatFormat.PEG_NATIVE) -> tuple[ChatMessage, FieldGrowth | None]:
    """`map_growing_accounted` without the spans the mapping dropped."""
    message, growth, _dropped = map_growing_accounted(result, spine, fmt)
    return message, growth


def map_growing_accounted(result: ParseResult, spine: tuple[AstId, ...], fmt: ChatFormat | str = ChatFormat.PEG_NATIVE
                          ) -> tuple[ChatMessage, FieldGrowth | None, list[tuple[int, int]]]:
    """`map_result(result, fmt)`, how that message grows when the open nodes `spine` (outermost first, each
    the last child of the one before, ending at the end of the text) grow, or None when the growth is not a
    plain append to one field, and the spans whose field text the mapping dropped (`map_accounted`).

    Why an append is exact: the generic mapper walks the tree pre-order and the spine is the last path of
    that walk, so the innermost acting node on it is the last node mapped (nothing mapped later can react to
    its text). The outer acting nodes must not depend on their text's length either (a `tool-args` node
    that does not start with `{` is ignored whatever it holds). The innermost node's rule is then text-local:
    content and reasoning append their text, JSON arguments are the text right-stripped, a string value is
    its text JSON-escaped; and the mapper's final state shows where the text went (the last published call).
    """
    f = ChatFormat.of(fmt)
    if f in (ChatFormat.PEG_GEMMA4, ChatFormat.PEG_MINIMAX_M3):
        message, dropped = map_accounted(result, f)
        return message, None, dropped
    ast = result.ast
    mapper = ChatPegMapper()
    message = mapper.from_ast(ast, result)
    growth = _growth(result, spine, mapper, message)
    return message, growth, mapper.dropped


def _growth(result: ParseResult, spine: tuple[AstId, ...], mapper: ChatPegMapper,
            message: ChatMessage) -> FieldGrowth | None:
    """How `message` (`mapper`'s of `result`) grows while the open nodes `spine` do (see map_growing)."""
    ast = result.ast
    acting = _acting_on(ast, spine)
    if not acting:
        return FieldGrowth("")  # feeds_no_field
    node = acting[-1]
    for outer in acting[:-1]:
        if not (outer.tag == TOOL_ARGS and outer.text and not outer.text.startswith("{")):
            return None
    if any(d.tag in ACTING_TAGS for d in ast.walk(node.children)):
        return None
    if node.tag == CONTENT:
        return FieldGrowth("content")
    if node.tag == REASONING:
        # reasoning holding only whitespace maps to none: only once it shows is the growth an append
        return FieldGrowth("reasoning_content") if message.reasoning_content else None
    call = mapper.filling()
    if call is None:
        return None
    if node.tag == TOOL_ARGS:
        stripped = rstrip_c(node.text)
        if stripped.startswith("{") and call.arguments == stripped:
            return FieldGrowth("arguments", call_index=call.index, trailing_space=node.text[len(stripped):])
        return None
    value_local = node.tag == TOOL_ARG_STRING_VALUE and node.text and call.quote_open
    if value_local and call.arguments.endswith(escape_inner(node.text)):
        return FieldGrowth("arguments", call_index=call.index, escaped=True)
    return None
