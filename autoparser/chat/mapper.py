"""From a tagged AST to a `ChatMessage`, and the parse entry point (`common_chat_peg_parse`).

The generic mapper walks the AST once, pre-order, and reacts to the chat tags of `builder.py`. Tool-call
arguments are assembled as JSON *text* so that every prefix of a streamed output maps to a prefix of the final
arguments (what makes streaming deltas append-only): JSON formats copy the raw argument text, tagged formats
build `{"name":"value",...}` piece by piece, leaving quotes and braces open until the closing tag is seen.

Two formats whose arguments are nested XML-ish or custom value syntaxes have their own mappers (Gemma 4,
MiniMax-M3); they rebuild the arguments from rule-named / tagged sub-nodes.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from json.encoder import encode_basestring

from autoparser.chat.builder import ChatBuilder
from autoparser.chat.tags import (
    CONTENT,
    NAME_TAGS,
    REASONING,
    TOOL,
    TOOL_ARG,
    TOOL_ARG_CLOSE,
    TOOL_ARG_NAME,
    TOOL_ARG_OPEN,
    TOOL_ARG_STRING_VALUE,
    TOOL_ARG_VALUE,
    TOOL_ARGS,
    TOOL_ARGS_STRING,
    TOOL_CLOSE,
    TOOL_ID,
    TOOL_NAME,
    TOOL_NAME_ESCAPED,
    TOOL_OPEN,
    VALUE_KEY,
    VALUE_STRING,
    VALUE_TOKEN,
)
from autoparser.errors import ParseError
from autoparser.peg import Arena, Ast, AstNode, ParseResult
from autoparser.peg.ast import INVALID_AST_ID, AstId
from autoparser.peg.nodes import C_SPACE
from autoparser.peg.utf8 import ESCAPED_BYTE, ESCAPED_RANGE, to_text
from autoparser.types import ChatFormat, ChatMessage, ToolCall

__all__ = [
    "ACTING_TAGS",
    "TOOL_ARG_ARRAY",
    "TOOL_ARG_ITEM",
    "TOOL_ARG_OBJECT",
    "ChatPegMapper",
    "FillingCall",
    "Gemma4Mapper",
    "MiniMaxM3Mapper",
    "dump_string",
    "escape_inner",
    "json_brace_depth",
    "map_accounted",
    "map_result",
    "normalize_quotes_to_json",
    "peg_parse",
    "rstrip_c",
    "without_open_calls",
]

# Tags of the MiniMax-M3 recursive XML argument values.
TOOL_ARG_OBJECT = "tool-arg-object"
TOOL_ARG_ARRAY = "tool-arg-array"
TOOL_ARG_ITEM = "tool-arg-item"



def dump_string(s: str) -> str:
    """JSON string literal as nlohmann's dump() writes it: non-ASCII raw, control characters escaped.

    Undecodable bytes (surrogate escapes) become U+FFFD: the C++ would throw on them, and a message field
    must stay encodable.
    """
    if not s.isascii():
        s = ESCAPED_BYTE.sub("\ufffd", s)
    return encode_basestring(s)  # what json.dumps(s, ensure_ascii=False) calls, without its Python layers


# The characters dump_string changes: what JSON escapes (quote, backslash, controls) and undecodable bytes
_ESCAPED_IN_JSON = re.compile('[\x00-\x1f"\\\\' + ESCAPED_RANGE + ']')


def escape_inner(s: str) -> str:
    """The body of the JSON string literal of `s` (escaped as nlohmann writes it), without the quotes."""
    if _ESCAPED_IN_JSON.search(s) is None:
        return s  # the common case while streaming a string value: nothing to escape
    return dump_string(s)[1:-1]


def rstrip_c(s: str) -> str:
    """`s` without trailing whitespace as C's isspace sees it (Python's rstrip would also take Unicode spaces)."""
    return s.rstrip(C_SPACE)


def _is_word_char(ch: str) -> bool:
    # C isalnum on bytes: ASCII letters and digits only
    return ch == "_" or (ch.isascii() and ch.isalnum())


_PY_LITERALS = (("True", "true"), ("False", "false"), ("None", "null"))


_CONTROL_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\b": "\\b", "\f": "\\f"}


def normalize_quotes_to_json(s: str) -> str:
    """Python-ish value text -> JSON text: single-quoted strings, True/False/None.

    Works on prefixes too (a streamed value is normalised on every chunk): a partial literal maps to the
    same-length prefix of its JSON spelling (`Tr` -> `tr`), so outputs only ever grow.
    """
    out: list[str] = []
    in_single = in_double = False
    i = 0
    n = len(s)
    while i < n:
        c = s[i]
        if c == "\\" and i + 1 < n:
            nxt = s[i + 1]
            if in_single:
                if nxt == "'":
                    out.append("'")
                elif nxt == '"':
                    out.append('\\"')
                else:
                    out.append(c + nxt)
                i += 2
                continue
            if in_double:
                out.append("'" if nxt == "'" else c + nxt)  # (`\'` is Python's, not JSON's)
                i += 2
                continue
            out.append(c)  # outside strings only the backslash is copied; the next char is processed normally
            i += 1
            continue
        if c == '"':
            if in_single:
                out.append('\\"')
            else:
                in_double = not in_double
                out.append(c)
        elif c == "'":
            if in_double:
                out.append(c)
            else:
                in_single = not in_single
                out.append('"')
        elif not in_single and not in_double and c in "TFN" and (i == 0 or not _is_word_char(s[i - 1])):
            j = i
            while j < n and _is_word_char(s[j]):
                j += 1
            token = s[i:j]
            for py, js in _PY_LITERALS:
                if py.startswith(token):
                    out.append(js[: len(token)])
                    i = j
                    break
            else:
                out.append(c)
                i += 1
            continue
        elif (in_single or in_double) and c < " ":
            # A raw control character (a template printing a value with a real newline) cannot stand in a
            # JSON string: escaped, the arguments stay valid JSON (the C++ leaves them invalid).
            out.append(_CONTROL_ESCAPES.get(c) or f"\\u{ord(c):04x}")
        else:
            out.append(c)
        i += 1
    return "".join(out)


def _name_of(tag: str, text: str) -> str:
    """The name a name node (`NAME_TAGS`) spells: as written, a JSON string's body decoded, an attribute's value
    unescaped (its node is atomic: never cut inside an entity)."""
    if tag == TOOL_NAME:
        return rstrip_c(text)
    return html.unescape(text) if tag == TOOL_NAME_ESCAPED else _decoded_prefix(text)


def _decoded_prefix(body: str) -> str:
    """The text a JSON string body stands for, as far as it is complete (an escape cut off by the end of a
    streamed output waits for the rest)."""
    for cut in range(min(len(body), 6) + 1):
        try:
            decoded = json.loads('"' + body[:len(body) - cut] + '"')
        except ValueError:
            continue
        return decoded if isinstance(decoded, str) else ""
    return ""


def json_brace_depth(s: str) -> int:
    """Unclosed `{` in JSON-ish text, ignoring braces inside double-quoted strings (`[` is not tracked).

    Jumps from quote to quote (str.find/count run in C): a per-character loop, or a regex over the string
    bodies, costs hundreds of microseconds on a few KB of code in an argument, on every streamed step.
    """
    depth = 0
    pos = 0  # start of the current stretch outside strings
    while True:
        q = s.find('"', pos)
        if q < 0:
            return depth + s.count("{", pos) - s.count("}", pos)
        depth += s.count("{", pos, q) - s.count("}", pos, q)
        end = q
        while True:  # the closing quote: one preceded by an even run of backslashes
            end = s.find('"', end + 1)
            if end < 0:
                return depth  # an unterminated string runs to the end
            k = end - 1
            while k > q and s[k] == "\\":
                k -= 1
            if (end - 1 - k) % 2 == 0:
                break
        pos = end + 1


def _json_not_object(text: str) -> bool:
    """Whether arguments' text is a JSON value other than an object (a string, an array, a number, a literal)."""
    text = text.strip(C_SPACE)
    return bool(text) and (text[0] in '"[-0123456789' or text in ("true", "false", "null"))


@dataclass
class _Call:
    name: str = ""
    arguments: str = ""
    id: str = ""

    def freeze(self) -> ToolCall:
        return ToolCall(self.name, self.arguments, self.id)


class _Message:
    """Mutable message under construction."""

    __slots__ = ("content", "reasoning_content", "tool_calls")

    def __init__(self) -> None:
        self.content = ""
        self.reasoning_content = ""
        self.tool_calls: list[_Call] = []

    def freeze(self) -> ChatMessage:
        return ChatMessage("assistant", self.content, self.reasoning_content,
                           tuple(c.freeze() for c in self.tool_calls))


@dataclass(frozen=True)
class FillingCall:
    """The call a mapper was filling when its walk ended, when that is the last published call (streaming
    appends to its arguments)."""

    index: int
    arguments: str
    quote_open: bool
    """A string value's closing quote is still to come (it is added when the value's tag closes)."""


class ChatPegMapper:
    """The generic mapper (`common_chat_peg_mapper`). One instance maps one parse result."""

    def __init__(self) -> None:
        self.msg = _Message()
        self._pending: _Call | None = None  # opened, not yet published (no name seen)
        self._current: _Call | None = None  # the call being filled: the pending one or the last published
        self._arg_count = 0
        self._closing_quote_pending = False
        self._args_buffer = ""  # arguments seen before the tool name
        self._pending_start = 0  # where the pending call's opener begins
        # Spans of the text whose field text this mapping leaves out of the message (as llama.cpp's does): a
        # call that never got a name, arguments that are no object. The recovery's coverage reads them.
        self.dropped: list[tuple[int, int]] = []

    # Arguments go to the current call once it has a name, to the buffer before that.
    def _target(self) -> str:
        cur = self._current
        return cur.arguments if cur is not None and cur.name else self._args_buffer

    def _set_target(self, value: str) -> None:
        cur = self._current
        if cur is not None and cur.name:
            cur.arguments = value
        else:
            self._args_buffer = value

    def from_ast(self, ast: Ast, result: ParseResult) -> ChatMessage:
        act = self.map
        for node in ast.walk(result.nodes):
            if node.tag:  # (most nodes are untagged rules, e.g. of JSON values: no call for those)
                act(node)
        pending = self._pending
        if pending is not None and not pending.name and not result.need_more_input:
            # (a call still open at the end of a partial parse is undecided, not dropped; an atomic that ran into
            # the end says what it dropped itself: OBS_DROPPED)
            self.dropped.append((self._pending_start, result.end))
        if pending is not None and pending.name:
            if self._args_buffer:
                pending.arguments = self._args_buffer
            if self._closing_quote_pending and pending.arguments:
                pending.arguments += '"'
            self.msg.tool_calls.append(pending)
            self._pending = None
        # A reasoning block holding only whitespace (e.g. a `<think></think>` prefill) is no reasoning.
        if self.msg.reasoning_content and not self.msg.reasoning_content.strip(" \n\r\t"):
            self.msg.reasoning_content = ""
        return self.msg.freeze()

    def filling(self) -> FillingCall | None:
        """The call being filled, if it has a name, is published and is the last one (else None)."""
        cur, calls = self._current, self.msg.tool_calls
        if cur is None or not cur.name or self._pending is not None or not calls or calls[-1] is not cur:
            return None
        return FillingCall(len(calls) - 1, cur.arguments, self._closing_quote_pending)

    def map(self, node: AstNode) -> None:
        tag = node.tag
        if not tag:
            return
        msg = self.msg
        if tag == REASONING:
            msg.reasoning_content += node.sanitized_text()
        elif tag == CONTENT:
            msg.content += node.sanitized_text()
        elif tag == TOOL_OPEN:
            if self._pending is not None:  # (the call opened before never got a name)
                self.dropped.append((self._pending_start, node.start))
            self._pending_start = node.start
            self._pending = self._current = _Call()
            self._arg_count = 0
            self._args_buffer = ""
            self._closing_quote_pending = False
        elif tag == TOOL_ID:
            if self._current is not None:
                text = rstrip_c(node.text)
                if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
                    text = text[1:-1]
                self._current.id = text
            else:
                self.dropped.append((node.start, node.end))
        elif tag in NAME_TAGS:
            cur = self._current
            if cur is not None:
                cur.name = _name_of(tag, node.text)
                if self._args_buffer:
                    cur.arguments = self._args_buffer
                    self._args_buffer = ""
                elif not cur.arguments:
                    cur.arguments = "{"
                # publish as soon as the name is known, so a streamed call shows up before it is complete
                if self._pending is not None:
                    msg.tool_calls.append(self._pending)
                    self._current = self._pending
                    self._pending = None
            else:
                self.dropped.append((node.start, node.end))
        elif tag == TOOL_ARGS:
            text = rstrip_c(node.text)
            if self._current is not None and text.startswith("{"):
                self._set_target(text)
            elif _json_not_object(text):  # (llama.cpp maps such arguments to `{}`; tagged ones map their parts)
                self.dropped.append((node.start, node.end))
        elif tag == TOOL_ARGS_STRING:
            text = _decoded_prefix(node.text).strip(C_SPACE)
            if self._current is not None and text.startswith("{"):
                self._set_target(text)
            elif text:
                self.dropped.append((node.start, node.end))
        elif tag == TOOL_ARG_OPEN:
            self._closing_quote_pending = False
        elif tag == TOOL_ARG_NAME:
            if self._current is not None:
                name = node.text
                if name and name[0] in C_SPACE:
                    name = name[1:]  # at most one leading whitespace character is dropped
                entry = ("," if self._arg_count > 0 else "") + dump_string(rstrip_c(name)) + ":"
                self._arg_count += 1
                self._set_target((self._target() or "{") + entry)
        elif tag in (TOOL_ARG_VALUE, TOOL_ARG_STRING_VALUE):
            if self._current is not None:
                self._map_value(node.text, tag == TOOL_ARG_STRING_VALUE)
            else:
                self.dropped.append((node.start, node.end))
        elif tag == TOOL_ARG_CLOSE:
            if self._current is not None and self._closing_quote_pending:
                self._set_target(self._target() + '"')
                self._closing_quote_pending = False
        elif tag == TOOL_CLOSE:
            self._close_tool(node.end)
        elif tag in (VALUE_TOKEN, VALUE_STRING, VALUE_KEY):
            if self._current is None:
                self.dropped.append((node.start, node.end))
            elif tag == VALUE_TOKEN:
                self._set_target(self._target() + node.text)
            elif tag == VALUE_STRING:  # (its closing quote once the format's own closing quote is read)
                self._set_target(self._target() + '"' + escape_inner(node.text) + ("" if node.is_partial else '"'))
            elif not node.is_partial:
                self._set_target(self._target() + dump_string(rstrip_c(node.text)))

    def _map_value(self, value: str, is_string: bool) -> None:
        if is_string:
            add = ""
            if not value:
                # an empty string value: the closing quote comes with the arg-close tag
                add = '"'
                self._closing_quote_pending = True
            else:
                if not self._closing_quote_pending:
                    add = '"'
                    self._closing_quote_pending = True
                add += escape_inner(value)
        elif value:
            add = normalize_quotes_to_json(value)
        else:
            add = ""
        self._set_target(self._target() + add)

    def _close_tool(self, end: int) -> None:
        cur = self._current
        if cur is None:
            return
        if not cur.name and self._args_buffer:
            cur.arguments = self._args_buffer
            self._args_buffer = ""
        if self._closing_quote_pending:
            cur.arguments += '"'
            self._closing_quote_pending = False
        depth = json_brace_depth(cur.arguments)
        if depth > 0:
            cur.arguments += "}" * depth
        if self._pending is not None:
            if cur.name:
                self.msg.tool_calls.append(self._pending)
            else:
                self.dropped.append((self._pending_start, end))
            self._pending = None
        # (a closed call takes nothing more: an argument after it is no part of it, as llama.cpp's mapper resets
        # its current call since b11434, common/chat-peg-parser.cpp)
        self._current = None


# The tags ChatPegMapper.map acts on; any other tag (TOOL, TOOL_ARG, ...) only groups nodes.
ACTING_TAGS = frozenset({REASONING, CONTENT, TOOL_OPEN, TOOL_ID, *NAME_TAGS, TOOL_ARGS, TOOL_ARGS_STRING,
                         TOOL_ARG_OPEN, TOOL_ARG_NAME, TOOL_ARG_VALUE, TOOL_ARG_STRING_VALUE, TOOL_ARG_CLOSE, TOOL_CLOSE,
                         VALUE_TOKEN, VALUE_STRING, VALUE_KEY})


# --- Gemma 4 ----------------------------------------------------------------------------------------------


def _gemma4_to_json(ast: Ast, nid: AstId) -> str:
    node = ast.get(nid)
    if not node.text:
        return ""
    rule = node.rule
    if rule in ("gemma4-number", "gemma4-bool", "gemma4-null", "gemma4-json-string"):
        return node.text
    if rule == "gemma4-python-string":
        return _python_quoted_as_json(node.text, closed=not node.is_partial)
    if rule == "gemma4-unopened-string":  # (its text up to the closing `<|"|>`, or to where that may begin)
        text, quote = node.text, '<|"|>'
        cut = len(text) - next((n for n in range(len(quote), 0, -1) if text.endswith(quote[:n])), 0)
        return '"' + escape_inner(text[:cut]) + ('"' if not node.is_partial else "")
    if rule == "gemma4-string-content":
        return escape_inner(node.text)
    if rule == "gemma4-string":
        out = '"'
        if node.children:
            out += _gemma4_to_json(ast, node.children[0])
            if not node.is_partial:
                out += '"'
        return out
    if rule in ("gemma4-array", "gemma4-dict", "gemma4-paren-dict"):
        open_, close = ("[", "]") if rule == "gemma4-array" else ("{", "}")
        # (a child that maps to nothing, the `missing_separator` repair between two members, adds no member)
        body = ",".join(part for c in node.children if (part := _gemma4_to_json(ast, c)))
        return open_ + body + ("" if node.is_partial else close)
    if rule in ("gemma4-dict-key-name", "gemma4-paren-key-name"):  # (`-paren-`: the relaxed parser's, in `(...)`)
        return node.text
    if rule in ("gemma4-dict-key", "gemma4-paren-key"):
        out = '"'
        if node.children:
            out += escape_inner(_gemma4_to_json(ast, node.children[0]))
        if not node.is_partial:
            out += '":'
        return out
    if rule in ("gemma4-dict-kv", "gemma4-paren-kv"):
        return "".join(_gemma4_to_json(ast, c) for c in node.children)
    if rule == "gemma4-value":
        return _gemma4_to_json(ast, node.children[0]) if node.children else ""
    return ""


# An escape of a Python string (`\\'`), or a double quote, which JSON escapes.
_PYTHON_ESCAPE_OR_QUOTE = re.compile(r'\\.|"', re.DOTALL)


def _python_quoted_as_json(text: str, *, closed: bool) -> str:
    """A Python string in single quotes (`'It\\'s'`, its escapes those JSON has and `\\'`), as a JSON string;
    without its closing quote where it is not `closed` yet."""
    body = text[1:-1] if closed else text[1:]
    if (len(body) - len(body.rstrip("\\"))) % 2:
        body = body[:-1]  # (an escape cut in two: its second half comes later)
    body = _PYTHON_ESCAPE_OR_QUOTE.sub(lambda m: "'" if m.group() == "\\'" else
                                       '\\"' if m.group() == '"' else m.group(), body)
    body = re.sub(r"[\x00-\x1f]", lambda m: f"\\u{ord(m.group()):04x}", body)
    return '"' + body + ('"' if closed else "")


class _CallTreeMapper:
    """The mappers whose calls are rebuilt from each `tool` node's subtree (llama.cpp's Gemma 4 and MiniMax-M3
    mappers): reasoning and content appended, each call made by `call`, None where the subtree holds none."""

    def __init__(self) -> None:
        self.msg = _Message()
        self.dropped: list[tuple[int, int]] = []  # (see ChatPegMapper.dropped)

    def from_ast(self, ast: Ast, result: ParseResult) -> ChatMessage:
        stack = list(reversed(result.nodes))
        while stack:
            node = ast.get(stack.pop())
            if node.tag == REASONING:
                self.msg.reasoning_content += node.sanitized_text()
            elif node.tag == CONTENT:
                self.msg.content += node.sanitized_text()
            elif node.tag == TOOL:
                call = self.call(ast, node)
                if call is not None:
                    self.msg.tool_calls.append(call)
                else:
                    self.dropped.append((node.start, node.end))
            else:
                stack.extend(reversed(node.children))
        return self.msg.freeze()

    def call(self, ast: Ast, node: AstNode) -> _Call | None:
        raise NotImplementedError


class Gemma4Mapper(_CallTreeMapper):
    """Gemma 4 (`common_chat_peg_gemma4_mapper`): arguments rebuilt from the `gemma4-*` value rules."""

    def call(self, ast: Ast, node: AstNode) -> _Call | None:
        name_id = ast.find_by_tag(node, TOOL_NAME)
        args_id = ast.find_by_tag(node, TOOL_ARGS)
        if name_id == INVALID_AST_ID or args_id == INVALID_AST_ID or ast.get(name_id).is_partial:
            return None
        args_node = ast.get(args_id)
        return _Call(ast.get(name_id).text, _gemma4_to_json(ast, args_node.children[0]) if args_node.children else "")


# --- MiniMax-M3 -------------------------------------------------------------------------------------------


def _m3_collect(ast: Ast, node: AstNode, tag: str, out: list[AstId]) -> None:
    """Nearest descendants tagged `tag` (no descent into a match)."""
    for cid in node.children:
        child = ast.get(cid)
        if child.tag == tag:
            out.append(cid)
        else:
            _m3_collect(ast, child, tag, out)


def _m3_value_of(ast: Ast, node: AstNode) -> AstId:
    for cid in node.children:
        child = ast.get(cid)
        if child.tag in (TOOL_ARG_VALUE, TOOL_ARG_STRING_VALUE, TOOL_ARG_OBJECT, TOOL_ARG_ARRAY):
            return cid
        if not child.tag:  # (a rule's node: the relaxed parser's value of any shape is one, recursive)
            found = _m3_value_of(ast, child)
            if found != INVALID_AST_ID:
                return found
    return INVALID_AST_ID


def _m3_member(ast: Ast, node: AstNode) -> str:
    name_id = ast.find_by_tag(node, TOOL_ARG_NAME)
    if name_id == INVALID_AST_ID:
        return ""
    return dump_string(ast.get(name_id).text) + ":" + _m3_value(ast, _m3_value_of(ast, node), not node.is_partial)


def _m3_container(ast: Ast, node: AstNode, is_object: bool, closed: bool) -> str:
    entries: list[AstId] = []
    _m3_collect(ast, node, TOOL_ARG if is_object else TOOL_ARG_ITEM, entries)
    parts: list[str] = []
    for eid in entries:
        entry = ast.get(eid)
        if is_object:
            text = _m3_member(ast, entry)
        else:
            text = _m3_value(ast, _m3_value_of(ast, entry), not entry.is_partial)
        if text:
            parts.append(text)
    out = ("{" if is_object else "[") + ",".join(parts)
    if closed:
        out += "}" if is_object else "]"
    return out


def _m3_value(ast: Ast, nid: AstId, closed: bool) -> str:
    if nid == INVALID_AST_ID:
        return ""
    node = ast.get(nid)
    if node.tag == TOOL_ARG_OBJECT:
        return _m3_container(ast, node, True, closed)
    if node.tag == TOOL_ARG_ARRAY:
        return _m3_container(ast, node, False, closed)
    if node.tag == TOOL_ARG_STRING_VALUE:
        return '"' + escape_inner(node.text) + ('"' if closed else "")
    return node.text  # numbers and booleans are written verbatim by the template


class MiniMaxM3Mapper(_CallTreeMapper):
    """MiniMax-M3 (`common_chat_peg_minimax_m3_mapper`): arguments rebuilt from nested `tool-arg` entries."""

    def call(self, ast: Ast, node: AstNode) -> _Call | None:
        name_id = ast.find_by_tag(node, TOOL_NAME)
        if name_id == INVALID_AST_ID:
            return None
        return _Call(ast.get(name_id).text, _m3_container(ast, node, True, not node.is_partial))


# --- parse entry point ------------------------------------------------------------------------------------

_default_arena: Arena | None = None


def _content_only_arena() -> Arena:
    """`content(rest()) end`: what an empty parser means (the whole output is content)."""
    global _default_arena
    if _default_arena is None:
        b = ChatBuilder()
        _default_arena = b.build(b.content(b.rest()) + b.end())
    return _default_arena


def map_result(result: ParseResult, fmt: ChatFormat | str = ChatFormat.PEG_NATIVE) -> ChatMessage:
    """Map a parse result with the mapper `fmt` calls for."""
    return map_accounted(result, fmt)[0]


def map_accounted(result: ParseResult, fmt: ChatFormat | str = ChatFormat.PEG_NATIVE) -> tuple[ChatMessage,
                                                                                               list[tuple[int, int]]]:
    """The message of a parse result, and the spans (of the parsed text) whose field text the mapping left out
    of it, as llama.cpp's mapper does: a call without a name, arguments that are no object."""
    f = ChatFormat.of(fmt)
    mapper: ChatPegMapper | Gemma4Mapper | MiniMaxM3Mapper
    if f is ChatFormat.PEG_GEMMA4:
        mapper = Gemma4Mapper()
    elif f is ChatFormat.PEG_MINIMAX_M3:
        mapper = MiniMaxM3Mapper()
    else:
        mapper = ChatPegMapper()
    return mapper.from_ast(result.ast, result), mapper.dropped


def without_open_calls(result: ParseResult) -> ParseResult:
    """`result` without the calls it is still inside (a partial `tool` node and all below it). The default
    parse shows a call whole or not at all: one found malformed later goes to content, and what a stream sent
    cannot be taken back."""
    # A node is partial only below partial nodes (NEED_MORE_INPUT unwinds through every rule above it): the
    # open calls and the nodes holding them are found among those, not by walking the whole tree (a stream does
    # this at every parse from the start).
    all_nodes = result.ast.nodes
    partial = [all_nodes[i] for i in result.nodes if all_nodes[i].is_partial]
    open_ids: set[AstId] = set()
    for n in partial:  # grows while it is read: depth first is not needed, every partial node is visited
        # a call: its `tool` node, or in formats without one (llama.cpp's tagged JSON calls) the node its
        # `tool-open` opens
        if n.tag == TOOL or any(all_nodes[c].tag == TOOL_OPEN for c in n.children):
            open_ids.add(n.id)
            continue
        partial.extend(all_nodes[c] for c in n.children if all_nodes[c].is_partial)
    if not open_ids:
        return result
    nodes = list(all_nodes)
    for n in partial:
        if not open_ids.isdisjoint(n.children):
            nodes[n.id] = n._replace(children=tuple(c for c in n.children if c not in open_ids))
    shown = Ast()
    shown.nodes = nodes
    # built field by field: dataclasses.replace costs as much as the rest of this
    return ParseResult(result.type, result.start, result.end, tuple(c for c in result.nodes if c not in open_ids),
                       result.invalid_utf8, shown, result.text, result.trace, result.observed)


def output_parser(arena: Arena | None) -> Arena:
    """The arena that parses model output: `arena`, or content-only when there is none."""
    return arena if arena is not None and not arena.empty() else _content_only_arena()


def parse_effective(parser: Arena, effective: str, offset: int) -> ParseResult:
    """Run `parser` over generation prompt + output (`offset` = the prompt's length), always as partial input
    (the C++ LENIENT flag: the input may continue).

    The engine's nesting guard raises ParseError; its position is re-anchored on the model output.
    """
    try:
        return parser.parse(effective, partial=True)
    except ParseError as e:
        raise ParseError(e.reason, text=effective[offset:], position=max(0, e.position - offset),
                         expected=e.expected) from None


def message_of(result: ParseResult, offset: int, *, partial: bool, fmt: ChatFormat) -> ChatMessage:
    """Map a parse of generation prompt + output; a failure raises ParseError about the output, except while
    streaming (`partial`) past the first character, where whatever the failed parse left is mapped."""
    if result.fail and not (partial and result.end > 0):
        raise ParseError(f"The model produced output that does not match the expected {fmt.value} format",
                         text=result.text[offset:], position=max(0, result.end - offset))
    return map_result(result, fmt)


def peg_parse(arena: Arena | None, text: str | bytes, *, is_partial: bool = False, generation_prompt: str = "",
              format: ChatFormat | str = ChatFormat.PEG_NATIVE) -> ChatMessage:
    """Parse model output into a message (`common_chat_peg_parse`).

    The generation prompt is prepended (parsers are built to consume it) and the input is always partial (the
    C++ LENIENT flag), so a complete output ending in open-ended content is fine. A mismatch raises ParseError
    whose position and excerpt refer to `text` alone; while streaming (`is_partial`, llama.cpp's name: the
    output may continue) a failure past the first character maps whatever the failed parse left instead.
    """
    output = to_text(text)
    effective = generation_prompt + output if generation_prompt else output
    offset = len(generation_prompt)
    result = parse_effective(output_parser(arena), effective, offset)
    return message_of(result, offset, partial=is_partial, fmt=ChatFormat.of(format))
