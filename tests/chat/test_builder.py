"""Chat builder helpers: parse behaviour of the tool-call layouts and the small combinators.

Vectors from llama.cpp tests/test-chat-auto-parser.cpp (`standard_json_tools` OpenAI / Cohere / function-as-key)
and tests/test-chat-peg-parser.cpp (`permute`). The GBNF side of these helpers is tested with the emitter.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from autoparser.chat.builder import COMMON_CHAT_MAX_PERMUTE, ChatBuilder, build_chat_peg_parser
from autoparser.chat.mapper import map_result, peg_parse
from autoparser.chat.stream import apply_deltas, compute_deltas
from autoparser.chat.tags import TOOL_NAME, TOOL_OPEN
from autoparser.peg import Arena
from autoparser.peg import nodes as N
from autoparser.types import ChatMessage, ToolCall, ToolDef, tool_parameters


def weather_tools() -> list[dict[str, Any]]:
    """`build_test_tools()` of test-chat-auto-parser.cpp."""
    return [{
        "type": "function",
        "function": {
            "name": "get_current_weather",
            "description": "Get the current weather in a given location",
            "parameters": {
                "type": "object",
                "properties": {
                    "location": {"type": "string", "description": "The city and state"},
                    "unit": {"type": "string", "description": "Temperature unit", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["location"],
            },
        },
    }]


def parse_full(arena: Arena, text: str) -> ChatMessage:
    """As the C++ unit tests do: one strict parse that must succeed, then the generic mapper."""
    result = arena.parse(text)
    assert result.success, f"parse failed at {result.end}: {text[:result.end]!r}[fail]{text[result.end:]!r}"
    return map_result(result)


def assert_streams(arena: Arena, text: str) -> ChatMessage:
    """Every prefix parses (partial) to a message that the deltas of the previous one fold into."""
    prev = acc = ChatMessage()
    for i in range(1, len(text) + 1):
        cur = peg_parse(arena, text[:i], is_partial=i < len(text))
        acc = apply_deltas(acc, compute_deltas(prev, cur))
        assert acc == cur, f"prefix {text[:i]!r}"
        prev = cur
    return prev


# --- standard_json_tools ------------------------------------------------------------------------------------


def openai_nested_parser() -> Arena:
    tools = weather_tools()
    return build_chat_peg_parser(lambda p: p.content(p.until("<tool_call>")) + p.optional(p.standard_json_tools(
        "<tool_call>", "</tool_call>", tools, True, False, name_key="function.name",
        args_key="function.arguments", call_id_key="id")) + p.end())


def cohere_flat_parser() -> Arena:
    tools = weather_tools()
    return build_chat_peg_parser(lambda p: p.content(p.until("<|START_ACTION|>")) + p.optional(
        p.standard_json_tools("<|START_ACTION|>[", "]<|END_ACTION|>", tools, True, False, name_key="tool_name",
                              args_key="parameters", gen_call_id_key="tool_call_id",
                              parameters_order=["tool_call_id", "tool_name", "parameters"])) + p.end())


def function_key_parser() -> Arena:
    tools = weather_tools()
    return build_chat_peg_parser(lambda p: p.content(p.until("<tool_calls>")) + p.optional(p.standard_json_tools(
        "<tool_calls>[", "]</tool_calls>", tools, True, False, args_key="args", function_is_key=True,
        call_id_key="id")) + p.end())


OPENAI_INPUT = ('Let me check the weather.<tool_call>{"id": "call_abc123", "function": {"name": '
                '"get_current_weather", "arguments": {"location": "NYC"}}}</tool_call>')
COHERE_INPUT = ('Let me search for that.<|START_ACTION|>[{"tool_call_id": 0, "tool_name": "get_current_weather", '
                '"parameters": {"location": "NYC", "unit": "celsius"}}]<|END_ACTION|>')
FUNCTION_KEY_INPUT = ("I'll call the weather function.<tool_calls>[{\"get_current_weather\": {\"id\": \"call-0001\", "
                      '"args": {"location": "NYC", "unit": "celsius"}}}]</tool_calls>')

JSON_TOOLS_CASES = [
    pytest.param(openai_nested_parser, OPENAI_INPUT,
                 ChatMessage(content="Let me check the weather.", tool_calls=(
                     ToolCall("get_current_weather", '{"location": "NYC"}', "call_abc123"),)), id="openai-nested"),
    pytest.param(cohere_flat_parser, COHERE_INPUT,
                 ChatMessage(content="Let me search for that.", tool_calls=(
                     ToolCall("get_current_weather", '{"location": "NYC", "unit": "celsius"}', "0"),)),
                 id="cohere-flat-generated-id"),
    pytest.param(function_key_parser, FUNCTION_KEY_INPUT,
                 ChatMessage(content="I'll call the weather function.", tool_calls=(
                     ToolCall("get_current_weather", '{"location": "NYC", "unit": "celsius"}', "call-0001"),)),
                 id="function-is-key"),
]


@pytest.mark.parametrize(("make", "text", "expected"), JSON_TOOLS_CASES)
def test_standard_json_tools_whole(make: Any, text: str, expected: ChatMessage) -> None:
    assert parse_full(make(), text) == expected


@pytest.mark.parametrize(("make", "text", "expected"), JSON_TOOLS_CASES)
def test_standard_json_tools_streamed(make: Any, text: str, expected: ChatMessage) -> None:
    assert assert_streams(make(), text) == expected


def test_flat_keys_follow_parameters_order() -> None:
    """Cohere's order puts the id first; the same fields in the default order do not parse."""
    arena = cohere_flat_parser()
    swapped = COHERE_INPUT.replace('"tool_call_id": 0, "tool_name": "get_current_weather"',
                                   '"tool_name": "get_current_weather", "tool_call_id": 0')
    assert not arena.parse(swapped).success


def test_flat_generated_id_as_string_and_absent_needs_its_comma() -> None:
    arena = cohere_flat_parser()
    quoted = COHERE_INPUT.replace('"tool_call_id": 0', '"tool_call_id": "7"')
    assert parse_full(arena, quoted).tool_calls[0].id == "7"
    # an absent optional id field still requires its separating comma (C++ behaviour)
    without = COHERE_INPUT.replace('"tool_call_id": 0, ', "")
    assert not arena.parse(without).success
    assert parse_full(arena, COHERE_INPUT.replace('"tool_call_id": 0', "")).tool_calls[0].id == ""


def test_flat_default_keys_parallel_and_array_wrapped() -> None:
    tools = weather_tools()
    arena = build_chat_peg_parser(lambda p: p.content(p.until("<tc>")) + p.optional(p.standard_json_tools(
        "<tc>", "</tc>", tools, True, False, array_wrapped=True)) + p.end())
    text = ('Hi<tc>[{"name": "get_current_weather", "arguments": {"location": "A"}}, '
            '{"name": "get_current_weather", "arguments": {"location": "B"}}]</tc>')
    msg = parse_full(arena, text)
    assert [json.loads(tc.arguments)["location"] for tc in msg.tool_calls] == ["A", "B"]
    assert assert_streams(arena, text) == msg


def test_openai_wrapper_accepted_only_when_asked() -> None:
    tools = weather_tools()
    text = '<tc>{"type": "function", "name": "get_current_weather", "arguments": {"location": "A"}}</tc>'
    plain = build_chat_peg_parser(lambda p: p.standard_json_tools("<tc>", "</tc>", tools, False, True) + p.end())
    wrapped = build_chat_peg_parser(lambda p: p.standard_json_tools("<tc>", "</tc>", tools, False, True,
                                                                    accept_openai_wrapper=True) + p.end())
    assert not plain.parse(text).success
    assert parse_full(wrapped, text).tool_calls == (ToolCall("get_current_weather", '{"location": "A"}'),)


def test_function_is_key_without_args_key_takes_bare_arguments() -> None:
    tools = weather_tools()
    arena = build_chat_peg_parser(lambda p: p.standard_json_tools("<tc>", "</tc>", tools, False, True,
                                                                  function_is_key=True) + p.end())
    msg = parse_full(arena, '<tc>{"get_current_weather": {"location": "Paris"}}</tc>')
    assert msg.tool_calls == (ToolCall("get_current_weather", '{"location": "Paris"}'),)


def test_force_and_optional_section() -> None:
    tools = weather_tools()
    forced = build_chat_peg_parser(lambda p: p.standard_json_tools("<tc>", "</tc>", tools, False, True) + p.end())
    optional = build_chat_peg_parser(lambda p: p.standard_json_tools("<tc>", "</tc>", tools, False, False) + p.end())
    assert not forced.parse("").success
    assert optional.parse("").success


def test_no_tools_is_epsilon() -> None:
    b = ChatBuilder()
    empty: list[Any] = []
    for tools in (None, empty):
        p = b.standard_json_tools("<tc>", "</tc>", tools, False, True)
        assert isinstance(b.parsers[p.id], N.Epsilon)


def test_schema_nodes_carry_effective_parameters() -> None:
    tools: list[Any] = [
        {"type": "function", "function": {"name": "a"}},
        {"type": "function", "function": {"name": "b", "parameters": None}},
        {"type": "function", "function": {"name": "c", "parameters": {}}},
        {"type": "function", "function": {"name": "d", "parameters": {"type": "object", "properties": {
            "x": {"type": "integer"}}}}},
        {"type": "not-a-function"},  # entries without "function" are skipped
    ]
    b = ChatBuilder()
    b.standard_json_tools("<tc>", "</tc>", tools, False, True)
    schemas = {n.name: n.schema for n in b.parsers if isinstance(n, N.Schema)}
    empty = {"type": "object", "properties": {}}
    assert schemas == {"tool-a-schema": empty, "tool-b-schema": empty, "tool-c-schema": empty,
                       "tool-d-schema": tools[3]["function"]["parameters"]}
    assert set(b.rules) >= {"tool-a", "tool-b", "tool-c", "tool-d", "tool-call"}
    assert b.parsers[b.rules["tool-call"]].trigger  # type: ignore[union-attr]


def test_tool_parameters_semantics() -> None:
    empty = {"type": "object", "properties": {}}
    assert tool_parameters({}) == empty
    assert tool_parameters({"parameters": None}) == empty
    assert tool_parameters({"parameters": {}}) == empty
    assert tool_parameters({"parameters": {"type": "object"}}) == {"type": "object"}


def test_tooldefs_accepted_in_place_of_openai_json() -> None:
    tool = ToolDef("get_current_weather", "", weather_tools()[0]["function"]["parameters"])
    arena = build_chat_peg_parser(lambda p: p.standard_json_tools("<tc>", "</tc>", [tool], False, True) + p.end())
    msg = parse_full(arena, '<tc>{"name": "get_current_weather", "arguments": {"location": "X"}}</tc>')
    assert msg.tool_calls[0].name == "get_current_weather"


# --- tags ------------------------------------------------------------------------------------------------


def test_atomic_tags_create_tag_before_atomic() -> None:
    b = ChatBuilder()
    p = b.tool_open("<")
    assert isinstance(b.parsers[p.id], N.Atomic)
    inner = b.parsers[b.parsers[p.id].child]  # type: ignore[union-attr]
    assert isinstance(inner, N.Tag) and inner.tag == TOOL_OPEN
    assert b.parsers[p.id].child == p.id - 1  # type: ignore[union-attr]
    plain = b.content("x")
    assert isinstance(b.parsers[plain.id], N.Tag)
    assert b.parsers[b.tool_name("n").id].child is not None  # type: ignore[union-attr]
    assert b.parsers[b.parsers[b.tool_name("n").id].child].tag == TOOL_NAME  # type: ignore[union-attr]


# --- small combinators ---------------------------------------------------------------------------------------


def accepts(arena: Arena, text: str) -> bool:
    return arena.parse(text).success


@pytest.mark.parametrize(("tag", "good", "bad"), [
    ("<think>\n", ["<think>", "<think>\n"], ["<think>\n\n", "think>"]),
    ("\n</think>\n\n", ["</think>", "\n</think>", "</think>\n\n", "\n</think>\n"], ["</think>\n\n\n"]),
    ("plain", ["plain"], [" plain"]),
])
def test_optspace(tag: str, good: list[str], bad: list[str]) -> None:
    arena = build_chat_peg_parser(lambda p: p.optspace(tag) + p.end())
    for s in good:
        assert accepts(arena, s), s
    for s in bad:
        assert not accepts(arena, s), s


def test_optspace_shape() -> None:
    b = ChatBuilder()
    p = b.optspace(" <t>\n")
    node = b.parsers[p.id]
    assert isinstance(node, N.Sequence)
    kinds = [type(b.parsers[c]).__name__ for c in node.children]
    assert kinds == ["Epsilon", "Repetition", "Literal", "Repetition"]


@pytest.mark.parametrize(("s", "delim", "accepted"), [
    ("", "", ""),
    ("<think>", "", "<think>"),
    ("<|im_start|>assistant\n<think>", "<think>", "<|im_start|>assistant\n"),
    ("<|im_start|>assistant\n", "<think>", "<|im_start|>assistant\n"),
])
def test_prefix(s: str, delim: str, accepted: str) -> None:
    arena = build_chat_peg_parser(lambda p: p.prefix(s, delim) + p.end())
    assert accepts(arena, accepted)
    if accepted != s:
        assert not accepts(arena, s)


def test_permute_accepts_every_ordering() -> None:
    arena = build_chat_peg_parser(lambda p: p.permute("abc", [p.literal("a"), p.literal("b"), p.literal("c")])
                                  + p.end())
    for s in ("abc", "acb", "bac", "bca", "cab", "cba"):
        assert accepts(arena, s), s
    for s in ("ab", "abca", "aab"):
        assert not accepts(arena, s), s


def test_permute_rules_per_subset() -> None:
    b = ChatBuilder()
    b.permute("abcd", [b.literal(c) for c in "abcd"])
    assert sorted(int(name.split("-")[1]) for name in b.rules if name.startswith("abcd-")) == list(range(1, 16))


def test_permute_single_and_too_many() -> None:
    single = build_chat_peg_parser(lambda p: p.permute("a", [p.literal("a")]) + p.end())
    assert accepts(single, "a") and not accepts(single, "aa")
    letters = "abcdefg"[: COMMON_CHAT_MAX_PERMUTE + 1]
    b = ChatBuilder()
    big = b.permute("big", [b.literal(c) for c in letters])
    assert not b.rules
    arena = b.build(big + b.end())
    assert accepts(arena, letters) and not accepts(arena, letters[::-1])
    assert isinstance(ChatBuilder().permute("x", []), object)


def test_tag_with_safe_content() -> None:
    arena = build_chat_peg_parser(lambda p: p.tag_with_safe_content(
        "chunk", "<x>", p.literal("<x>") + p.tool_name(p.until("</x>")) + "</x>") + p.end())
    result = arena.parse("hello <x>f</x> world")
    assert result.success
    assert map_result(result).content == "hello  world"
    no_marker = build_chat_peg_parser(lambda p: p.tag_with_safe_content("c", "", p.literal("!")) + p.end())
    r = no_marker.parse("ab!c")
    assert r.success and map_result(r).content == "abc"


# --- tagged and python-style tool calls ---------------------------------------------------------------------


def test_standard_constructed_tools() -> None:
    tools = weather_tools()
    arena = build_chat_peg_parser(lambda p: p.content(p.until("<tool_call>"))
                                  + p.standard_constructed_tools({}, tools, True, False) + p.end())
    text = ("Sure.<tool_call>\n<function=get_current_weather>\n<param=location>Paris, \"FR\"</param>\n"
            "<param='unit'>celsius</param>\n</function>\n</tool_call>")
    msg = parse_full(arena, text)
    # untyped tool-arg-value: the raw text goes through normalize_quotes_to_json; a quoted argument name keeps
    # its quotes inside the key, as in the C++ (the name tag spans the quoted literal)
    assert msg.tool_calls == (ToolCall("get_current_weather", '{"location":Paris, "FR","\'unit\'":celsius}'),)
    assert assert_streams(arena, text) == msg


def lfm2_tools() -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                                         "flag": {"type": "boolean"}, "opts": {"type": "object"}}}}}]


@pytest.mark.parametrize("json_literals", [False, True])
def test_python_style_tool_calls(json_literals: bool) -> None:
    tools = lfm2_tools()
    arena = build_chat_peg_parser(lambda p: p.python_style_tool_calls(tools, True, json_literals) + p.end())
    text = "[get_weather(city='Paris', days=3, flag=True, opts={'a': None}), get_weather(city=\"Rome\")]"
    msg = parse_full(arena, text)
    assert [json.loads(tc.arguments) for tc in msg.tool_calls] == [
        {"city": "Paris", "days": 3, "flag": True, "opts": {"a": None}}, {"city": "Rome"}]
    assert assert_streams(arena, text) == msg
    literal = "[get_weather(flag=true, opts={'a': null})]"
    assert arena.parse(literal).success is json_literals
    if json_literals:
        assert json.loads(parse_full(arena, literal).tool_calls[0].arguments) == {"flag": True, "opts": {"a": None}}
        assert "python-or-json-value" in arena.rules
        assert {"python-or-json-dict", "python-or-json-array"} <= set(arena.rules)


def test_python_style_single_call_only_without_parallel() -> None:
    tools = lfm2_tools()
    arena = build_chat_peg_parser(lambda p: p.python_style_tool_calls(tools, False, False) + p.end())
    assert arena.parse("[get_weather(city='A')]").success
    assert not arena.parse("[get_weather(city='A'), get_weather(city='B')]").success


# --- tool definitions ------------------------------------------------------------------------------------------


def test_parse_tools_reads_openai_lists() -> None:
    from autoparser.types import parse_tools

    tools = parse_tools([*weather_tools(), {"type": "function", "function": {"name": "noargs"}}, {"type": "function", "function": {"name": "texty", "parameters": '{"type": "object"}'}}])
    assert [t.name for t in tools] == ["get_current_weather", "noargs", "texty"]
    assert tools[0].description == "Get the current weather in a given location"
    assert tools[1].effective_parameters() == {"type": "object", "properties": {}}
    assert tools[2].parameters == {"type": "object"}
    assert parse_tools(None) == ()
    assert tools[0].to_openai() == weather_tools()[0]


@pytest.mark.parametrize("bad", [
    "not a list", [1], [{"function": {"name": "x"}}], [{"type": "retrieval"}], [{"type": "function"}],
    [{"type": "function", "function": {"name": "x", "parameters": "{oops"}}],
])
def test_parse_tools_rejects_malformed(bad: Any) -> None:
    from autoparser.errors import AutoparserError
    from autoparser.types import parse_tools

    with pytest.raises(AutoparserError):
        parse_tools(bad)
