"""Streaming deltas: `test_msg_diffs_compute` of llama.cpp tests/test-chat.cpp, the error cases of
`compute_diffs`, the client-side fold and the OpenAI chunk conversion."""

from __future__ import annotations

import itertools
import re

import pytest

from autoparser.chat.stream import apply_deltas, compute_deltas, string_diff
from autoparser.errors import AutoparserError, ParseError
from autoparser.types import ChatMessage, MessageDelta, ToolCall


def msg(content: str = "", reasoning: str = "", *calls: ToolCall) -> ChatMessage:
    return ChatMessage(content=content, reasoning_content=reasoning, tool_calls=calls)


# --- test_msg_diffs_compute ---------------------------------------------------------------------------------------


def test_content_from_empty() -> None:
    assert compute_deltas(msg(), msg("Hello, world!")) == [MessageDelta(content_delta="Hello, world!")]


def test_content_suffix() -> None:
    assert compute_deltas(msg("Hello,"), msg("Hello, world!")) == [MessageDelta(content_delta=" world!")]


def test_tool_call_appears_then_grows() -> None:
    msg0 = msg()
    msg1 = msg("", "", ToolCall("special_function", '{"ar', "123"))
    msg2 = msg("", "", ToolCall("special_function", '{"arg1": 1}', "123"))
    assert compute_deltas(msg0, msg1) == [
        MessageDelta(tool_call_index=0, tool_call_delta=ToolCall("special_function", '{"ar', "123"))]
    # neither id nor name changed: only the arguments suffix is sent
    assert compute_deltas(msg1, msg2) == [MessageDelta(tool_call_index=0, tool_call_delta=ToolCall("", 'g1": 1}', ""))]


def test_two_new_calls() -> None:
    msg2 = msg("", "", ToolCall("f1", '{"arg1": 1}', "123"), ToolCall("f2", '{"arg2": 2}', "222"))
    assert compute_deltas(msg(), msg2) == [
        MessageDelta(tool_call_index=0, tool_call_delta=ToolCall("f1", '{"arg1": 1}', "123")),
        MessageDelta(tool_call_index=1, tool_call_delta=ToolCall("f2", '{"arg2": 2}', "222")),
    ]


# --- the other rules of compute_diffs -----------------------------------------------------------------------------


def test_order_reasoning_content_then_calls() -> None:
    prev = msg("a", "r", ToolCall("f", "{", ""))
    cur = msg("ab", "rs", ToolCall("f", '{"x":1}', ""), ToolCall("g", "{}", "id2"))
    assert compute_deltas(prev, cur) == [
        MessageDelta(reasoning_content_delta="s"),
        MessageDelta(content_delta="b"),
        MessageDelta(tool_call_index=0, tool_call_delta=ToolCall("", '"x":1}', "")),
        MessageDelta(tool_call_index=1, tool_call_delta=ToolCall("g", "{}", "id2")),
    ]


def test_unchanged_gives_nothing() -> None:
    m = msg("a", "b", ToolCall("f", "{}", "1"))
    assert compute_deltas(m, m) == []


def test_id_or_name_change_resends_both() -> None:
    prev = msg("", "", ToolCall("f", "{}", ""))
    assert compute_deltas(prev, msg("", "", ToolCall("f", "{}", "abc"))) == [
        MessageDelta(tool_call_index=0, tool_call_delta=ToolCall("f", "", "abc"))]
    assert compute_deltas(msg("", "", ToolCall("", "{", "")), msg("", "", ToolCall("fn", "{", ""))) == [
        MessageDelta(tool_call_index=0, tool_call_delta=ToolCall("fn", "", ""))]
    # a name that grows is allowed (prefix -> longer)
    assert compute_deltas(msg("", "", ToolCall("spe", "", "")), msg("", "", ToolCall("special", "{", ""))) == [
        MessageDelta(tool_call_index=0, tool_call_delta=ToolCall("special", "{", ""))]


def test_only_last_previous_call_is_compared() -> None:
    prev = msg("", "", ToolCall("f", "{}", ""), ToolCall("g", "{", ""))
    cur = msg("", "", ToolCall("CHANGED", "{}", ""), ToolCall("g", "{}", ""))
    assert compute_deltas(prev, cur) == [MessageDelta(tool_call_index=1, tool_call_delta=ToolCall("", "}", ""))]


def test_shrink_to_prefix_gives_empty_delta() -> None:
    # a partial stop word that is erased by the next chunk
    assert string_diff("Hello <|", "Hello ") == ""
    assert compute_deltas(msg("Hello <|"), msg("Hello ")) == [MessageDelta(content_delta="")]


@pytest.mark.parametrize(("last", "cur", "expected"), [("", "abc", "abc"), ("ab", "abc", "c"), ("abc", "abc", ""),
                                                       ("abc", "ab", "")])
def test_string_diff(last: str, cur: str, expected: str) -> None:
    assert string_diff(last, cur) == expected


# --- errors -----------------------------------------------------------------------------------------------------


def test_content_rewritten_is_an_error() -> None:
    with pytest.raises(ParseError) as info:
        compute_deltas(msg("Hello"), msg("Help me"))
    assert info.value.reason == "Invalid diff: 'Hello' not found at start of 'Help me'"
    assert info.value.position == 3
    assert isinstance(info.value, AutoparserError)


def test_reasoning_rewritten_is_an_error() -> None:
    with pytest.raises(ParseError, match="Invalid diff: 'abc' not found at start of 'abd'"):
        compute_deltas(msg("", "abc"), msg("", "abd"))


def test_fewer_tool_calls_is_an_error() -> None:
    with pytest.raises(ParseError) as info:
        compute_deltas(msg("", "", ToolCall("f", "{}", "")), msg("text"))
    assert info.value.reason.startswith("Invalid diff: now finding less tool calls!\n  Previous (1):\n"
                                        "    - name: 'f', args: '{}'\n  Current (0):\n")


def test_tool_call_mismatch_is_an_error() -> None:
    with pytest.raises(ParseError, match="Invalid diff: tool call mismatch!"):
        compute_deltas(msg("", "", ToolCall("foo", "{", "")), msg("", "", ToolCall("bar", "{", "")))


def test_arguments_rewritten_is_an_error() -> None:
    with pytest.raises(ParseError, match="Invalid diff"):
        compute_deltas(msg("", "", ToolCall("f", '{"a"', "")), msg("", "", ToolCall("f", '{"b"', "")))


# --- fold and OpenAI chunks --------------------------------------------------------------------------------------


def test_apply_deltas_rebuilds_the_stream() -> None:
    steps = [
        msg(),
        msg("", "I'm"),
        msg("", "I'm thinking"),
        msg("Hi", "I'm thinking"),
        msg("Hi", "I'm thinking", ToolCall("f", "{", "7")),
        msg("Hi", "I'm thinking", ToolCall("f", '{"a": 1}', "7")),
        msg("Hi", "I'm thinking", ToolCall("f", '{"a": 1}', "7"), ToolCall("g", "{}", "")),
    ]
    acc = ChatMessage()
    for prev, cur in itertools.pairwise(steps):
        acc = apply_deltas(acc, compute_deltas(prev, cur))
        assert acc == cur


def test_apply_deltas_keeps_name_and_id_when_delta_omits_them() -> None:
    acc = msg("", "", ToolCall("f", "{", "7"))
    out = apply_deltas(acc, [MessageDelta(tool_call_index=0, tool_call_delta=ToolCall("", "}", ""))])
    assert out.tool_calls == (ToolCall("f", "{}", "7"),)
    grown = apply_deltas(ChatMessage(), [MessageDelta(tool_call_index=1, tool_call_delta=ToolCall("g", "{}", ""))])
    assert grown.tool_calls == (ToolCall(), ToolCall("g", "{}", ""))


def test_openai_chunks() -> None:
    """As llama.cpp's server writes them (common_chat_msg_diff_to_json_oaicompat) and OpenAI's streaming chunks
    have them: a call's first delta with id, type and name; the later ones index and arguments only (always an
    `arguments`, "" where the delta adds none)."""
    assert MessageDelta(content_delta="Hi").to_openai() == {"content": "Hi"}
    assert MessageDelta(reasoning_content_delta="r").to_openai() == {"reasoning_content": "r"}
    assert MessageDelta(content_delta="").to_openai() == {}
    first = MessageDelta(tool_call_index=0, tool_call_delta=ToolCall("f", '{"a', "call_1"))
    assert first.to_openai() == {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                                 "function": {"name": "f", "arguments": '{"a'}}]}
    more = MessageDelta(tool_call_index=0, tool_call_delta=ToolCall("", '": 1}', ""))
    assert more.to_openai() == {"tool_calls": [{"index": 0, "function": {"arguments": '": 1}'}}]}
    bare = MessageDelta(tool_call_index=2)
    assert bare.to_openai() == {"tool_calls": [{"index": 2, "function": {"arguments": ""}}]}


def test_a_calls_first_chunk_without_an_id_gets_one_as_the_server_makes_them() -> None:
    first = MessageDelta(tool_call_index=1, tool_call_delta=ToolCall("get_weather", "", ""))
    chunks = [first.to_openai()["tool_calls"][0] for _ in range(2)]
    assert [{k: v for k, v in c.items() if k != "id"} for c in chunks] == [
        {"index": 1, "type": "function", "function": {"name": "get_weather", "arguments": ""}}] * 2
    assert all(re.fullmatch(r"[0-9A-Za-z]{32}", c["id"]) for c in chunks)  # (llama.cpp's gen_tool_call_id)
    assert chunks[0]["id"] != chunks[1]["id"]


def test_streamed_chunks_have_openais_shape() -> None:
    """A real stream (llama.cpp's: arguments as they come), chunk by chunk: each call's first chunk names it
    with its id, the others add arguments; with the server's ids the stream's message carries the same ids."""
    from autoparser import generate, load_template
    from autoparser.types import gen_tool_call_id

    tools = [{"type": "function", "function": {"name": n, "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}}}} for n in ("get_weather", "get_time")]
    params = generate(load_template("Qwen__Qwen3-0.6B").source, {
        "messages": [{"role": "user", "content": "Hi"}], "tools": tools, "parallel_tool_calls": True})
    output = "".join(f'<tool_call>\n{{"name": "{n}", "arguments": {{"city": "Paris"}}}}\n</tool_call>\n'
                     for n in ("get_weather", "get_time"))
    for gen in (None, gen_tool_call_id):
        stream = params.stream(strict=True, gen_tool_call_id=gen)
        chunks = [d.to_openai() for i in range(0, len(output), 3) for d in stream.feed(output[i:i + 3])]
        final = stream.finish()
        chunks += [d.to_openai() for d in stream.last_deltas]
        calls = [c for chunk in chunks for c in chunk.get("tool_calls", [])]
        firsts = [c for c in calls if "id" in c]
        assert [(c["index"], c["type"], c["function"]["name"]) for c in firsts] == \
            [(0, "function", "get_weather"), (1, "function", "get_time")]
        assert all(re.fullmatch(r"[0-9A-Za-z]{32}", c["id"]) for c in firsts)
        assert all(set(c) == {"index", "function"} and set(c["function"]) == {"arguments"}
                   for c in calls if "id" not in c)
        assert len(calls) > len(firsts)  # (arguments streamed after the name)
        for i, call in enumerate(final.tool_calls):
            assert "".join(c["function"]["arguments"] for c in calls if c["index"] == i) == call.arguments
        assert [c.id for c in final.tool_calls] == ([c["id"] for c in firsts] if gen else ["", ""])


def test_message_dict_round_trip() -> None:
    m = msg("c", "r", ToolCall("f", '{"a":1}', "x"))
    d = m.to_dict()
    assert d == {"role": "assistant", "content": "c", "reasoning_content": "r",
                 "tool_calls": [{"name": "f", "arguments": '{"a":1}', "id": "x"}]}
    assert ChatMessage.from_dict(d) == m
    assert m.to_openai() == {"role": "assistant", "content": "c", "reasoning_content": "r", "tool_calls": [
        {"type": "function", "function": {"name": "f", "arguments": '{"a":1}'}, "id": "x"}]}


# --- StreamParser -------------------------------------------------------------------------------------------------


def _stream_arena() -> object:
    from autoparser.chat.builder import build_chat_peg_parser

    return build_chat_peg_parser(lambda p: p.optional("<think>" + p.reasoning(p.until("</think>")) + "</think>")
                                 + p.content(p.until("<call>")) + p.zero_or_more(p.tool(
                                     p.tool_open(p.literal("<call>")) + p.tool_name(p.chars("[a-z]"))
                                     + p.tool_args(p.json()) + p.tool_close(p.literal("</call>")))) + p.end())


def test_stream_parser_bytes_split_inside_utf8_and_generated_ids() -> None:
    from autoparser.chat.mapper import peg_parse
    from autoparser.chat.stream import StreamParser
    from autoparser.peg import Arena

    arena = _stream_arena()
    assert isinstance(arena, Arena)
    counter = iter(range(100))
    sp = StreamParser(arena, gen_tool_call_id=lambda: f"gen{next(counter)}")
    data = '<think>caf\u00e9</think>h\u00e9llo<call>fn{"a": "\u00e9"}</call><call>g{}</call>'.encode()
    acc = ChatMessage()
    for i in range(len(data)):
        deltas = sp.feed(data[i:i + 1])
        acc = apply_deltas(acc, deltas)
        assert "\udcc3" not in sp.text  # a split é is held back, never seen as an escaped byte
    final = sp.finish()
    acc = apply_deltas(acc, sp.last_deltas)
    expected = msg("h\u00e9llo", "caf\u00e9", ToolCall("fn", '{"a": "\u00e9"}', "gen0"), ToolCall("g", "{}", "gen1"))
    assert final == sp.message == expected
    assert acc == expected
    whole = peg_parse(arena, data.decode(), is_partial=False)
    assert whole.content == final.content and whole.reasoning_content == final.reasoning_content
    assert [(c.name, c.arguments) for c in whole.tool_calls] == [(c.name, c.arguments) for c in final.tool_calls]


def test_stream_parser_keeps_model_ids() -> None:
    from autoparser.chat.builder import build_chat_peg_parser
    from autoparser.chat.stream import StreamParser

    arena = build_chat_peg_parser(lambda p: p.tool(
        p.tool_open(p.literal("<call id=")) + p.tool_id(p.chars("[a-z0-9]")) + p.literal(">")
        + p.tool_name(p.chars("[a-z]")) + p.tool_args(p.json()) + p.tool_close(p.literal("</call>"))) + p.end())
    sp = StreamParser(arena, gen_tool_call_id=lambda: "generated")
    assert sp.feed("") == []
    assert sp.feed('<call id=m1>f{"a": ') == [
        MessageDelta(tool_call_index=0, tool_call_delta=ToolCall("f", '{"a":', "m1"))]
    sp.finish("1}</call>")
    assert sp.last_deltas == [MessageDelta(tool_call_index=0, tool_call_delta=ToolCall("", " 1}", ""))]
    assert sp.message.tool_calls == (ToolCall("f", '{"a": 1}', "m1"),)
