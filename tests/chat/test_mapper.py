"""The generic mapper, the specialised mappers, normalize_quotes_to_json and the parse entry point.

Vectors from llama.cpp tests/test-chat-peg-parser.cpp (native / Qwen3-like examples, prefix tool names, invalid
UTF-8) and tests/test-chat-auto-parser.cpp (normalize_quotes_to_json, tagged arguments with embedded quotes).
Incremental tests feed every token prefix (the C++ `simple_tokenize`) and every character prefix.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoparser.chat.builder import ChatBuilder, build_chat_peg_parser
from autoparser.chat.mapper import (
    TOOL_ARG_ARRAY,
    TOOL_ARG_ITEM,
    TOOL_ARG_OBJECT,
    map_result,
    normalize_quotes_to_json,
    peg_parse,
)
from autoparser.chat.stream import apply_deltas, compute_deltas
from autoparser.errors import ParseError
from autoparser.peg import Arena, P
from autoparser.types import ChatFormat, ChatMessage, ToolCall


def simple_tokenize(text: str) -> list[str]:
    """Port of tests/peg-parser/simple-tokenize.cpp: split before each of ` \\n\\t{},["].<>=/`."""
    tokens: list[str] = []
    cur = ""
    for ch in text:
        if ch in " \n\t{},[\"].<>=/" and cur:
            tokens.append(cur)
            cur = ""
        cur += ch
    if cur:
        tokens.append(cur)
    return tokens


def strict(arena: Arena, text: str, fmt: ChatFormat = ChatFormat.PEG_NATIVE) -> ChatMessage:
    result = arena.parse(text)
    assert result.success, f"{text[:result.end]!r}[failed->]{text[result.end:]!r}"
    return map_result(result, fmt)


def incremental(arena: Arena, pieces: list[str], fmt: ChatFormat = ChatFormat.PEG_NATIVE,
                check: Callable[[ChatMessage], None] | None = None) -> ChatMessage:
    """Parse growing prefixes (partial except the last, as the C++ tests do); every step must not fail and its
    deltas must fold onto the previous message to give exactly the new one."""
    prev = acc = ChatMessage()
    text = ""
    for k, piece in enumerate(pieces):
        text += piece
        last = k == len(pieces) - 1
        result = arena.parse(text, partial=not last)
        assert not result.fail, f"{text[:result.end]!r}[failed->]{text[result.end:]!r}"
        cur = map_result(result, fmt)
        if check is not None:
            check(cur)
        acc = apply_deltas(acc, compute_deltas(prev, cur))
        assert acc == cur, text
        prev = cur
    return prev


def by_char(text: str) -> list[str]:
    return list(text)


def create_tools() -> list[dict[str, Any]]:
    """`create_tools()` of test-chat-peg-parser.cpp."""
    location = {"type": "string", "description": "The city and state, e.g. San Francisco, CA"}
    unit = {"type": "string", "enum": ["celsius", "fahrenheit"],
            "description": "The temperature unit to use. Infer this from the users location."}
    return [
        {"type": "function", "function": {
            "name": "get_current_weather", "description": "Get the current weather in a given location",
            "parameters": {"type": "object", "properties": {"location": location, "unit": unit},
                           "required": ["location", "unit"]}}},
        {"type": "function", "function": {
            "name": "get_forecast", "description": "Get the weather forecast for a given location",
            "parameters": {"type": "object", "properties": {
                "location": location, "unit": unit,
                "days": {"type": "integer", "description": "Number of days to forecast (1-10)", "minimum": 1,
                         "maximum": 10}}, "required": ["location", "unit"]}}},
        {"type": "function", "function": {
            "name": "search_knowledge_base", "description": "Search the internal technical documentation.",
            "parameters": {"type": "object", "properties": {
                "query": {"type": "string", "description": "The search query string."},
                "max_results": {"type": "integer", "default": 5},
                "category": {"type": "string", "enum": ["api", "troubleshooting", "billing", "general"]}},
                "required": ["query", "category"], "additionalProperties": False},
            "strict": True}},
    ]


# --- test_example_native ---------------------------------------------------------------------------------------


def native_parser(tools: list[Any] | None, tool_choice_required: bool, reasoning_none: bool, json_schema: Any,
                  parallel: bool) -> Arena:
    def build(p: ChatBuilder) -> P:
        reasoning = p.optional("<think>" + p.reasoning(p.until("</think>")) + "</think>" + p.space())
        lead = p.eps() if reasoning_none else reasoning
        if tools:
            tool_call = p.standard_json_tools("<tool_call>[", "]</tool_call>", tools, parallel, tool_choice_required)
            return p.sequence([lead, p.content(p.until("<tool_call>")), p.optional(p.space() + tool_call),
                               p.space(), p.end()])
        if isinstance(json_schema, dict) and json_schema:
            return p.sequence([lead, p.content(p.schema(p.json(), "response-output", json_schema)), p.space(),
                               p.end()])
        return p.sequence([lead, p.content(p.rest()), p.end()])

    return build_chat_peg_parser(build)


def _w(loc: str, extra: str = "") -> str:
    return f'{{"location": "{loc}", "unit": "fahrenheit"{extra}}}'


INVOICE = '{"invoice_number": "INV-2025-001", "amount": 1250.50, "due_date": "2025-12-31"}'
NATIVE_CASES = [
    # name, tools, reasoning_none, json_schema, parallel, generation_prompt, input, reasoning, content, calls
    ("content with reasoning (no generation_prompt)", None, False, None, False, "",
     "<think>The user said hello, I must say hello back</think>\nHello",
     "The user said hello, I must say hello back", "Hello", []),
    ("content without reasoning (no generation_prompt)", None, False, None, False, "", "Hello", "", "Hello", []),
    ("content with reasoning_format = none (tags appear in content)", None, True, None, False, "",
     "<think>The user said hello, I must say hello back</think>\nHello", "",
     "<think>The user said hello, I must say hello back</think>\nHello", []),
    ("content with reasoning generation_prompt", None, False, None, False, "<think>",
     "The user said hello, I must say hello back</think>\nHello", "The user said hello, I must say hello back",
     "Hello", []),
    ("content with reasoning generation_prompt and reasoning_format = none", None, True, None, False, "",
     "The user said hello, I must say hello back</think>\nHello", "",
     "The user said hello, I must say hello back</think>\nHello", []),
    ("content with closed reasoning generation_prompt (empty reasoning discarded)", None, False, None, False,
     "<think></think>", "Hello", "", "Hello", []),
    ("tools with reasoning generation_prompt", "tools", False, None, False, "<think>",
     "I must get the weather in New York</think>\n<tool_call>["
     '{"name": "get_current_weather", "arguments": ' + _w("New York City, NY") + "}]</tool_call>",
     "I must get the weather in New York", "", [("get_current_weather", _w("New York City, NY"))]),
    ("parallel tools with reasoning generation_prompt", "tools", False, None, True, "<think>",
     "I must get the weather in New York and San Francisco and a 3 day forecast of each.</think>\nLet me "
     "search that for you.<tool_call>["
     '{"name": "get_current_weather", "arguments": ' + _w("New York City, NY") + "}, "
     '{"name": "get_current_weather", "arguments": ' + _w("San Francisco, CA") + "}, "
     '{"name": "get_forecast", "arguments": ' + _w("New York City, NY", ', "days": 3') + "}, "
     '{"name": "get_forecast", "arguments": ' + _w("San Francisco, CA", ', "days": 3') + "}]</tool_call>",
     "I must get the weather in New York and San Francisco and a 3 day forecast of each.",
     "Let me search that for you.",
     [("get_current_weather", _w("New York City, NY")), ("get_current_weather", _w("San Francisco, CA")),
      ("get_forecast", _w("New York City, NY", ', "days": 3')),
      ("get_forecast", _w("San Francisco, CA", ', "days": 3'))]),
    ("response_format with reasoning generation_prompt", None, False,
     {"type": "object", "properties": {"invoice_number": {"type": "string"}, "amount": {"type": "number"},
                                       "due_date": {"type": "string"}},
      "required": ["invoice_number", "amount", "due_date"]}, False, "<think>",
     "I must produce the invoice in the requested format</think>\n" + INVOICE,
     "I must produce the invoice in the requested format", INVOICE, []),
]


@pytest.mark.parametrize(("name", "tools", "reasoning_none", "json_schema", "parallel", "gen_prompt", "text",
                          "reasoning", "content", "calls"), NATIVE_CASES, ids=[c[0] for c in NATIVE_CASES])
def test_example_native(name: str, tools: Any, reasoning_none: bool, json_schema: Any, parallel: bool,
                        gen_prompt: str, text: str, reasoning: str, content: str,
                        calls: list[tuple[str, str]]) -> None:
    arena = native_parser(create_tools() if tools else None, False, reasoning_none, json_schema, parallel)
    expected = ChatMessage(content=content, reasoning_content=reasoning,
                           tool_calls=tuple(ToolCall(n, a) for n, a in calls))
    assert strict(arena, gen_prompt + text) == expected
    # the parse entry point prepends the generation prompt itself and parses as partial input
    assert peg_parse(arena, text, generation_prompt=gen_prompt) == expected
    # streamed character by character, every prefix maps to a message the deltas grow monotonically into
    streamed = incremental(arena, [*by_char(gen_prompt + text), ""])
    assert streamed == expected


# --- Qwen3-coder-like (tagged arguments) ---------------------------------------------------------------------


def qwen3_coder_parser() -> Arena:
    tools = create_tools()

    def build(p: ChatBuilder) -> P:
        content = p.rule("content", p.content(p.until("<tool_call>")))
        tool_parsers = []
        for tool in tools:
            function = tool["function"]
            name = function["name"]
            required = set(function.get("required", []))  # as the C++ test: looked up on `function`, so empty
            arg_parsers = []
            for param_name, param_schema in function["parameters"]["properties"].items():
                kind = param_schema.get("type", "object")
                if kind == "string":
                    value = p.tool_arg_string_value(p.schema(
                        p.until_one_of(["</parameter>\n<parameter=", "</parameter>\n</function>"]),
                        f"tool-{name}-arg-{param_name}-schema", param_schema, True))
                else:
                    value = p.tool_arg_json_value(p.schema(p.json(), f"tool-{name}-arg-{param_name}-schema",
                                                           param_schema))
                arg = p.tool_arg(p.sequence([
                    p.tool_arg_open("<parameter=" + p.tool_arg_name(p.literal(param_name)) + ">"),
                    value,
                    p.tool_arg_close("</parameter>\n" + p.peek(p.literal("<parameter=") | p.literal("</function>")))]))
                rule = p.rule(f"tool-{name}-arg-{param_name}", arg)
                arg_parsers.append(rule if param_name in required else p.optional(rule))
            tool_parsers.append(p.rule(f"tool-{name}", p.tool_open("<function=" + p.tool_name(p.literal(name)) + ">")
                                       << p.sequence(arg_parsers) << p.tool_close(p.literal("</function>"))))
        tool_call = p.trigger_rule("tool-call", "<tool_call>" << p.choice(tool_parsers) << "</tool_call>")
        return content + p.zero_or_more(p.space() + tool_call) + p.end()

    return build_chat_peg_parser(build)


QWEN3_CODER_INPUT = ("Let me search the knowledge base for cat pictures.<tool_call>\n<function=search_knowledge_base>\n"
                     "<parameter=query>cat pictures</parameter>\n<parameter=category>general</parameter>\n"
                     "</function>\n</tool_call>")
QWEN3_CODER_EXPECTED = ChatMessage(
    content="Let me search the knowledge base for cat pictures.",
    tool_calls=(ToolCall("search_knowledge_base", '{"query":"cat pictures","category":"general"}'),))


@pytest.mark.parametrize("split", [simple_tokenize, by_char], ids=["tokens", "chars"])
def test_qwen3_coder_incremental(split: Callable[[str], list[str]]) -> None:
    arena = qwen3_coder_parser()
    assert incremental(arena, split(QWEN3_CODER_INPUT)) == QWEN3_CODER_EXPECTED
    assert strict(arena, QWEN3_CODER_INPUT) == QWEN3_CODER_EXPECTED


def test_qwen3_coder_partial_string_argument_streams_open() -> None:
    arena = qwen3_coder_parser()
    cut = QWEN3_CODER_INPUT.index("pictures</parameter>") + 3
    msg = peg_parse(arena, QWEN3_CODER_INPUT[:cut], is_partial=True)
    assert msg.tool_calls == (ToolCall("search_knowledge_base", '{"query":"cat pic'),)


# --- Qwen3 non-coder (JSON arguments) ------------------------------------------------------------------------


QWEN3_INPUT = ('I need to get the weather.\n<tool_call>{"name": "get_current_weather", "arguments": '
               '{"location": "New York City, NY", "unit": "fahrenheit"}}</tool_call>')


def qwen3_parser() -> Arena:
    tools = create_tools()
    return build_chat_peg_parser(lambda p: p.sequence([
        p.content(p.until("<tool_call>")),
        p.optional(p.space() + p.standard_json_tools("<tool_call>", "</tool_call>", tools, True, False)),
        p.end()]))


def test_qwen3_non_coder_tool_call() -> None:
    msg = strict(qwen3_parser(), QWEN3_INPUT)
    assert msg == ChatMessage(content="I need to get the weather.\n", tool_calls=(
        ToolCall("get_current_weather", '{"location": "New York City, NY", "unit": "fahrenheit"}'),))


@pytest.mark.parametrize("split", [simple_tokenize, by_char], ids=["tokens", "chars"])
def test_qwen3_non_coder_incremental(split: Callable[[str], list[str]]) -> None:
    arena = qwen3_parser()
    assert incremental(arena, split(QWEN3_INPUT)) == strict(arena, QWEN3_INPUT)


# --- command-r7b-like (ids, names and args as separate fields in any order) -------------------------------------


def test_command7_parser() -> None:
    def build(p: ChatBuilder) -> P:
        thinking = p.reasoning_block("<|START_THINKING|>" << p.reasoning(p.until("<|END_THINKING|>"))
                                     << "<|END_THINKING|>")
        response = "<|START_RESPONSE|>" << p.content(p.until("<|END_RESPONSE|>")) << "<|END_RESPONSE|>"
        call_id = p.atomic('"tool_call_id"' << (":" << ('"' + p.tool_id(p.string_content('"')) + '"')))
        call_name = p.atomic('"tool_name"' << (":" << ('"' + p.tool_name(p.string_content('"')) + '"')))
        call_args = '"parameters"' << (":" << p.tool_args(p.json()))
        fields = p.rule("tool-call-fields", call_id | call_name | call_args)
        call = p.rule("tool-call", p.tool(p.tool_open(p.literal("{")) << fields
                                          << p.zero_or_more(p.literal(",") << fields)
                                          << p.tool_close(p.literal("}"))))
        calls = p.rule("tool-calls", "<|START_ACTION|>" << ("[" << call << p.zero_or_more(p.literal(",") << call)
                                                           << "]") << "<|END_ACTION|>")
        return p.optional(thinking) << (calls | response) + p.end()

    arena = build_chat_peg_parser(build)
    reasoning = "To plan an effective trip to Japan, we need to:\n\n1. Identify key sites.\n2. Find lodging."
    params = {"destination": "Japan", "duration": 14, "budget": 4000,
              "interests": ["historical sites", "modern attractions"], "accommodation_preferences": "affordable"}
    action = json.dumps([{"tool_call_id": "call_0", "tool_name": "plan_trip", "parameters": params}],
                        separators=(",", ":"))
    tokens = (["<|START_THINKING|>", *simple_tokenize(reasoning), "<|END_THINKING|>", "<|START_ACTION|>",
               *simple_tokenize(action), "<|END_ACTION|>"])
    expected = ChatMessage(reasoning_content=reasoning, tool_calls=(
        ToolCall("plan_trip", json.dumps(params, separators=(",", ":")), "call_0"),))
    assert strict(arena, "".join(tokens)) == expected
    assert incremental(arena, tokens) == expected


# --- prefix tool names -------------------------------------------------------------------------------------------


def prefix_tools() -> list[dict[str, Any]]:
    return [
        {"type": "function", "function": {"name": "special_function", "description": "A special function",
                                          "parameters": {"type": "object", "properties": {"arg1": {"type": "integer"}},
                                                         "required": ["arg1"]}}},
        {"type": "function", "function": {"name": "special_function_with_opt",
                                          "description": "A special function with optional params",
                                          "parameters": {"type": "object", "properties": {
                                              "arg1": {"type": "integer"}, "arg2": {"type": "integer"}},
                                              "required": ["arg1"]}}},
    ]


def prefix_parser() -> Arena:
    tools = prefix_tools()
    markers = {"tool_call_start_marker": "<tool_call>", "tool_call_end_marker": "</tool_call>",
               "function_opener": "<function=", "function_closer": "</function>", "function_name_suffix": ">",
               "parameter_key_prefix": "<param=", "parameter_key_suffix": ">", "parameter_closer": "</param>"}
    return build_chat_peg_parser(lambda p: p.rule("content", p.content(p.until("<tool_call>")))
                                 + p.zero_or_more(p.space() + p.standard_constructed_tools(markers, tools, False,
                                                                                           False)) + p.end())


def prefix_input(name: str) -> str:
    return f"Let me call the function.<tool_call><function={name}><param=arg1>42</param></function></tool_call>"


@pytest.mark.parametrize("name", ["special_function_with_opt", "special_function"])
def test_prefix_tool_names_parse(name: str) -> None:
    msg = strict(prefix_parser(), prefix_input(name))
    assert msg == ChatMessage(content="Let me call the function.", tool_calls=(ToolCall(name, '{"arg1":42}'),))


@pytest.mark.parametrize("split", [simple_tokenize, by_char], ids=["tokens", "chars"])
def test_prefix_tool_names_never_matched_early(split: Callable[[str], list[str]]) -> None:
    def no_short_name(msg: ChatMessage) -> None:
        assert all(tc.name != "special_function" for tc in msg.tool_calls), msg

    final = incremental(prefix_parser(), split(prefix_input("special_function_with_opt")), check=no_short_name)
    assert [tc.name for tc in final.tool_calls] == ["special_function_with_opt"]


# --- tagged string arguments with embedded quotes -----------------------------------------------------------------


def test_tagged_args_with_embedded_quotes() -> None:
    tools: list[dict[str, Any]] = [{"type": "function", "function": {"name": "edit", "description": "Edit a file", "parameters": {
        "type": "object", "properties": {"filename": {"type": "string"}, "oldString": {"type": "string"},
                                         "newString": {"type": "string"}},
        "required": ["filename", "oldString", "newString"]}}}]

    def build(p: ChatBuilder) -> P:
        choice = p.choice()
        for tool in tools:
            function = tool["function"]
            name = function["name"]
            arg_parsers = []
            for param_name in function["parameters"]["properties"]:
                arg = p.tool_arg(p.tool_arg_open(p.literal("<parameter=") + p.tool_arg_name(p.literal(param_name))
                                                 + p.literal(">")) + p.space()
                                 + p.tool_arg_string_value(p.until("</parameter>")) + p.space()
                                 + p.tool_arg_close(p.literal("</parameter>")))
                arg_parsers.append(p.optional(p.rule("arg-" + param_name, arg)))
            seq = p.eps()
            for i, a in enumerate(arg_parsers):
                if i > 0:
                    seq = seq + p.space()
                seq = seq + a
            func = (p.tool_open(p.literal("<function=") + p.tool_name(p.literal(name)) + p.literal(">")) + p.space()
                    + seq + p.space() + p.tool_close(p.literal("</function>")))
            choice |= p.rule("tool-" + name, p.tool(func))
        section = p.literal("<seed:tool_call>") + p.space() + choice + p.space() + p.literal("</seed:tool_call>")
        return p.content(p.until("<seed:tool_call>")) + p.optional(section) + p.end()

    arena = build_chat_peg_parser(build)
    text = ("<seed:tool_call>\n<function=edit>\n<parameter=filename>foo.cpp</parameter>\n"
            "<parameter=oldString>def foo(arg = \"14\"):\n    return arg + \"bar\"\n\n</parameter>\n"
            "<parameter=newString>def foo(arg = \"15\"):\n    pass\n\n</parameter>\n</function>\n</seed:tool_call>")
    msg = strict(arena, text)
    assert [tc.name for tc in msg.tool_calls] == ["edit"]
    args = json.loads(msg.tool_calls[0].arguments)
    assert args == {"filename": "foo.cpp", "oldString": 'def foo(arg = "14"):\n    return arg + "bar"\n\n',
                    "newString": 'def foo(arg = "15"):\n    pass\n\n'}
    assert incremental(arena, by_char(text)) == msg


# --- invalid UTF-8 ---------------------------------------------------------------------------------------------


def utf8_parser() -> Arena:
    return build_chat_peg_parser(lambda p: "<think>" + p.reasoning(p.until("</think>")) + "</think>"
                                 + p.content(p.rest()) + p.end())


def test_invalid_utf8_replaced_in_reasoning_and_content() -> None:
    data = b"<think>plan\xff\xfe</think>caf\xc3\xa9 \x80 done"
    result = utf8_parser().parse(data)
    assert result.success
    msg = map_result(result)
    assert msg.reasoning_content == "plan\ufffd\ufffd"
    assert msg.content == "caf\u00e9 \ufffd done"
    assert peg_parse(utf8_parser(), data) == msg


def test_invalid_utf8_partial_keeps_trailing_incomplete_sequence_out() -> None:
    result = utf8_parser().parse(b"<think>x</think>a\x80b\xe4\xb8", partial=True)
    assert not result.fail
    assert map_result(result).content == "a\ufffdb"


# --- normalize_quotes_to_json ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("src", "expected"), [
    ("{'key': 'value'}", '{"key": "value"}'),
    ("{'code': 'print(\\'hello\\')'}", '{"code": "print(\'hello\')"}'),
    ("{'msg': 'He said \"hi\"'}", '{"msg": "He said \\"hi\\""}'),
    ("{'path': 'C:\\\\Users\\\\test'}", '{"path": "C:\\\\Users\\\\test"}'),
    ("{'text': 'line1\\nline2'}", '{"text": "line1\\nline2"}'),
    ('{"already_double": \'single_value\'}', '{"already_double": "single_value"}'),
    ("{'filename': 'foo.cpp', 'oldString': 'def foo(arg = \"14\"):\\n    return arg + \"bar\"\\n', "
     "'newString': 'def foo(arg = \"15\"):\\n    pass\\n'}",
     '{"filename": "foo.cpp", "oldString": "def foo(arg = \\"14\\"):\\n    return arg + \\"bar\\"\\n", '
     '"newString": "def foo(arg = \\"15\\"):\\n    pass\\n"}'),
    ("{'a': True, 'b': False, 'c': None}", '{"a": true, "b": false, "c": null}'),
    ("[Tr", "[tr"), ("Fals", "fals"), ("N", "n"),
    ("Nonesuch", "Nonesuch"), ("xTrue", "xTrue"), ("_None", "_None"), ("Truth", "Truth"),
    ("'True'", '"True"'), ('"None"', '"None"'),
    ("\\x", "\\x"), ("'a\\", '"a\\'), ("{\"k\": \"it's\"}", '{"k": "it\'s"}'),
])
def test_normalize_quotes_to_json(src: str, expected: str) -> None:
    assert normalize_quotes_to_json(src) == expected


def test_normalize_quotes_embedded_quotes_is_valid_json() -> None:
    src = ("{'filename': 'foo.cpp', 'oldString': 'def foo(arg = \"14\"):\\n    return arg + \"bar\"\\n', "
           "'newString': 'def foo(arg = \"15\"):\\n    pass\\n'}")
    parsed = json.loads(normalize_quotes_to_json(src))
    assert parsed["filename"] == "foo.cpp"
    assert '"14"' in parsed["oldString"] and '"15"' in parsed["newString"]


def test_normalize_quotes_escapes_raw_control_characters_inside_strings() -> None:
    # A template printing a Python repr-less value puts a real newline inside the quotes (LFM2.5); JSON cannot
    # hold it raw. Outside strings (whitespace between values) it stays as it is.
    src = "{'city': 'Z\u00fcrich \"center\"\nline2\t\x01',\n 'n': 1}"
    out = normalize_quotes_to_json(src)
    assert out == '{"city": "Z\u00fcrich \\"center\\"\\nline2\\t\\u0001",\n "n": 1}'
    assert json.loads(out) == {"city": 'Z\u00fcrich "center"\nline2\t\x01', "n": 1}
    outs = [normalize_quotes_to_json(src[:i]) for i in range(len(src) + 1)]
    assert all(b.startswith(a) for a, b in itertools.pairwise(outs))


def test_normalize_quotes_prefixes_are_monotonic() -> None:
    src = "{'a': True, 'b': [None, False], 'c': 'x \"z\"', 'd': 1.5}"
    outs = [normalize_quotes_to_json(src[:i]) for i in range(len(src) + 1)]
    for a, b in itertools.pairwise(outs):
        assert b.startswith(a), (a, b)
    assert json.loads(outs[-1]) == {"a": True, "b": [None, False], "c": 'x "z"', "d": 1.5}


def test_normalize_quotes_escaped_single_quote_is_not_prefix_stable() -> None:
    """Known C++ behaviour kept as is: a lone trailing backslash is copied, then `\\'` becomes `'`."""
    assert normalize_quotes_to_json("'x\\") == '"x\\'
    assert normalize_quotes_to_json("'x\\'") == "\"x'"


# --- mapper rules -----------------------------------------------------------------------------------------------


def tagged_parser(string_values: bool = True) -> Arena:
    """`<f=NAME>` then `<a=KEY>VALUE</a>` pairs then `</f>`; values tagged as string or as JSON-ish values."""
    def build(p: ChatBuilder) -> P:
        value = p.until("</a>")
        tagged_value = p.tool_arg_string_value(value) if string_values else p.tool_arg_value(value)
        arg = p.tool_arg(p.tool_arg_open("<a=" + p.tool_arg_name(p.until(">")) + ">") + tagged_value
                         + p.tool_arg_close(p.literal("</a>")))
        call = p.tool(p.tool_open(p.literal("<f=")) + p.tool_name(p.chars("[a-z_]")) + ">"
                      + p.tool_args(p.zero_or_more(arg)) + p.tool_close(p.literal("</f>")))
        return p.content(p.until("<f=")) + p.zero_or_more(call) + p.end()

    return build_chat_peg_parser(build)


def test_zero_arg_tagged_call_gives_empty_object() -> None:
    assert peg_parse(tagged_parser(), "<f=ping></f>").tool_calls == (ToolCall("ping", "{}"),)


def test_tagged_string_args_quote_handling() -> None:
    arena = tagged_parser()
    msg = peg_parse(arena, '<f=go><a= city\n>Pa"ris</a><a=empty></a></f>')
    # at most one leading whitespace char is dropped from the name, all trailing whitespace is
    assert msg.tool_calls == (ToolCall("go", '{"city":"Pa\\"ris","empty":""}'),)
    assert json.loads(msg.tool_calls[0].arguments) == {"city": 'Pa"ris', "empty": ""}
    # streaming: the string stays open until its closing tag
    partial = peg_parse(arena, "<f=go><a=city>Par", is_partial=True)
    assert partial.tool_calls == (ToolCall("go", '{"city":"Par'),)
    # a call cut right after the name tag is published with "{"
    assert peg_parse(arena, "<f=go>", is_partial=True).tool_calls == (ToolCall("go", "{"),)


def test_tagged_json_values_are_normalised_and_braces_closed() -> None:
    arena = tagged_parser(string_values=False)
    msg = peg_parse(arena, "<f=go><a=opts>{'x': [True, {'y': None}]</a><a=n>3</a></f>")
    # the unclosed `{` of the value is closed at tool-close; the unclosed `[` is not tracked
    assert msg.tool_calls[0].arguments == '{"opts":{"x": [true, {"y": null}],"n":3}}'
    msg2 = peg_parse(arena, "<f=go><a=s>{'k': '}{'</a></f>")
    assert msg2.tool_calls[0].arguments == '{"s":{"k": "}{"}}'


def test_tool_id_quotes_and_trailing_space_stripped() -> None:
    arena = build_chat_peg_parser(lambda p: p.tool(
        p.tool_open(p.literal("[")) + p.tool_id(p.until(" ")) + " " + p.tool_name(p.until("(")) + "("
        + p.tool_args(p.json()) + ")" + p.tool_close(p.literal("]"))) + p.end())
    assert peg_parse(arena, '["abc" fn({"a":1})]').tool_calls == (ToolCall("fn", '{"a":1}', "abc"),)
    assert peg_parse(arena, '[x fn({})]').tool_calls == (ToolCall("fn", "{}", "x"),)


def test_arguments_before_name_are_buffered() -> None:
    """Formats that write the arguments before the function name (args buffered until the name arrives)."""
    arena = build_chat_peg_parser(lambda p: p.tool(
        p.tool_open(p.literal("<")) + p.tool_args(p.json()) + "@" + p.tool_name(p.chars("[a-z]"))
        + p.tool_close(p.literal(">"))) + p.end())
    assert peg_parse(arena, '<{"a": 1}@fn>').tool_calls == (ToolCall("fn", '{"a": 1}'),)
    # without a name the call is dropped
    nameless = build_chat_peg_parser(lambda p: p.tool(p.tool_open(p.literal("<")) + p.tool_args(p.json())
                                                      + p.tool_close(p.literal(">"))) + p.end())
    assert peg_parse(nameless, '<{"a": 1}>').tool_calls == ()


def test_whitespace_only_reasoning_is_cleared_and_blocks_concatenate() -> None:
    arena = build_chat_peg_parser(lambda p: p.zero_or_more("<t>" + p.reasoning(p.until("</t>")) + "</t>")
                                  + p.content(p.rest()) + p.end())
    assert peg_parse(arena, "<t> \n\t\r</t>hi") == ChatMessage(content="hi")
    assert peg_parse(arena, "<t>a</t><t>b</t>hi").reasoning_content == "ab"


# --- parse entry point ------------------------------------------------------------------------------------------


def test_empty_arena_is_content_only() -> None:
    assert peg_parse(None, "Hello <b>") == ChatMessage(content="Hello <b>")
    assert peg_parse(Arena(), "x", generation_prompt="gp:") == ChatMessage(content="gp:x")


def test_parse_error_message_and_position_relative_to_output() -> None:
    arena = native_parser(create_tools(), True, False, None, False)
    with pytest.raises(ParseError) as info:
        peg_parse(arena, "abc</think>Hello<tool_call>[oops", generation_prompt="<think>", format="peg-native")
    err = info.value
    assert err.reason == "The model produced output that does not match the expected peg-native format"
    assert err.text == "abc</think>Hello<tool_call>[oops"
    assert err.position == len("abc</think>Hello")
    assert "^" in str(err)


def test_parse_error_position_points_into_output() -> None:
    arena = build_chat_peg_parser(lambda p: p.literal("<gp>") + p.literal("ab") + p.content(p.literal("cd")) + p.end())
    with pytest.raises(ParseError) as info:
        peg_parse(arena, "abxx", generation_prompt="<gp>", format=ChatFormat.PEG_SIMPLE)
    assert info.value.position == 2
    assert "peg-simple" in info.value.reason
    assert info.value.excerpt().splitlines() == ["abxx", "  ^"]


def test_partial_failure_past_start_maps_what_there_is() -> None:
    arena = build_chat_peg_parser(lambda p: p.literal("ab") + p.content(p.literal("cd")) + p.end())
    assert peg_parse(arena, "abx", is_partial=True) == ChatMessage()
    with pytest.raises(ParseError):
        peg_parse(arena, "abx", is_partial=False)


# --- Gemma 4 --------------------------------------------------------------------------------------------------


def gemma4_parser() -> Arena:
    def build(p: ChatBuilder) -> P:
        p.rule("gemma4-string-content", p.until('<|"|>'))
        p.rule("gemma4-string", p.literal('<|"|>') + p.ref("gemma4-string-content") + p.literal('<|"|>'))
        p.rule("gemma4-bool", p.json_bool())
        p.rule("gemma4-null", p.json_null())
        p.rule("gemma4-number", p.json_number())
        p.rule("gemma4-dict-key", p.rule("gemma4-dict-key-name", p.chars("[^:}]", 1, -1)) + p.literal(":"))
        p.rule("gemma4-dict-kv", p.ref("gemma4-dict-key") + p.space() + p.ref("gemma4-value"))

        def dict_() -> P:
            ws = p.space()
            member = p.ref("gemma4-dict-kv")
            members = p.sequence([member, p.zero_or_more(p.sequence([p.literal(","), ws, member]))])
            return p.sequence([p.literal("{"), ws, p.choice([p.literal("}"), p.sequence([members, ws,
                                                                                         p.literal("}")])])])

        def array() -> P:
            ws = p.space()
            value = p.ref("gemma4-value")
            elements = p.sequence([value, p.zero_or_more(p.sequence([p.literal(","), ws, value]))])
            return p.sequence([p.literal("["), ws, p.choice([p.literal("]"), p.sequence([elements, ws,
                                                                                         p.literal("]")])])])

        p.rule("gemma4-dict", dict_)
        p.rule("gemma4-array", array)
        p.rule("gemma4-value", lambda: p.choice([p.ref("gemma4-string"), p.ref("gemma4-dict"),
                                                 p.ref("gemma4-array"), p.ref("gemma4-number"),
                                                 p.ref("gemma4-bool"), p.ref("gemma4-null")]))
        choice = p.choice()
        for name in ("get_weather", "get_weather_now"):
            choice |= p.rule("tool-" + name, p.tool(p.sequence([
                p.tool_open(p.tool_name(p.literal(name)) + p.peek(p.literal("{"))),
                p.tool_args(p.ref("gemma4-dict"))])))
        tool_call = p.trigger_rule("tool-call", p.repeat("<|tool_call>call:" + choice + "<tool_call|>", 0, -1))
        thought = p.optional("<|channel>thought\n" + p.reasoning(p.until("<channel|>")) + "<channel|>")
        content = p.content(p.until("<|tool_call>"))
        return thought + content + tool_call + p.end()

    return build_chat_peg_parser(build)


GEMMA4_INPUT = ('<|channel>thought\nhmm<channel|>Sure.<|tool_call>call:get_weather{city:<|"|>Paris "FR"<|"|>,'
                'days:3,opts:{deep:true,none:null},tags:[<|"|>a<|"|>,<|"|>b<|"|>]}<tool_call|>')


def test_gemma4_mapper() -> None:
    arena = gemma4_parser()
    msg = peg_parse(arena, GEMMA4_INPUT, format=ChatFormat.PEG_GEMMA4)
    assert msg.reasoning_content == "hmm" and msg.content == "Sure."
    assert [tc.name for tc in msg.tool_calls] == ["get_weather"]
    assert json.loads(msg.tool_calls[0].arguments) == {"city": 'Paris "FR"', "days": 3,
                                                      "opts": {"deep": True, "none": None}, "tags": ["a", "b"]}


def test_gemma4_streaming() -> None:
    arena = gemma4_parser()
    prev = acc = ChatMessage()
    for i in range(1, len(GEMMA4_INPUT) + 1):
        cur = peg_parse(arena, GEMMA4_INPUT[:i], is_partial=i < len(GEMMA4_INPUT), format="peg-gemma4")
        assert all(tc.name != "get_weather_now" for tc in cur.tool_calls)
        acc = apply_deltas(acc, compute_deltas(prev, cur))
        assert acc == cur
        prev = cur
    partial = peg_parse(arena, GEMMA4_INPUT[:GEMMA4_INPUT.index("Paris") + 3], is_partial=True,
                        format=ChatFormat.PEG_GEMMA4)
    assert partial.tool_calls == (ToolCall("get_weather", '{"city":"Par'),)


# --- MiniMax-M3 -------------------------------------------------------------------------------------------------


def minimax_parser() -> Arena:
    """A reduced MiniMax-M3 invoke: XML elements whose values are strings, JSON scalars, objects or arrays."""

    def build(p: ChatBuilder) -> P:
        def element(tag: str, value: Callable[[str], P]) -> P:
            close = f"</{tag}>"
            return p.rule(f"arg-{tag}", p.tool_arg(p.tool_arg_open("<" + p.tool_arg_name(p.literal(tag)) + ">")
                                                   + value(close)))

        def string_value(close: str) -> P:
            return p.tool_arg_string_value(p.until(close)) + p.tool_arg_close(p.literal(close))

        def json_value(close: str) -> P:
            return p.tool_arg_json_value(p.json()) + p.tool_arg_close(p.literal(close))

        def object_value(close: str) -> P:
            return (p.tag(TOOL_ARG_OBJECT, p.zero_or_more(p.space() + element("flag", json_value)))
                    + p.space() + p.tool_arg_close(p.literal(close)))

        def array_value(close: str) -> P:
            item = p.rule("arg-item", p.tag(TOOL_ARG_ITEM, "<item>" + string_value("</item>")))
            return p.tag(TOOL_ARG_ARRAY, p.repeat(p.space() + item, 0, -1)) + p.space() + p.tool_arg_close(
                p.literal(close))

        members = p.zero_or_more(p.space() + p.choice([element("city", string_value), element("days", json_value),
                                                       element("opts", object_value),
                                                       element("tags", array_value)]))
        call = p.tool(p.tool_open('<invoke name="' + p.tool_name(p.literal("search")) + '">') + members
                      + p.space() + p.tool_close(p.literal("</invoke>")))
        return p.content(p.until("<invoke")) + p.zero_or_more(call) + p.end()

    return build_chat_peg_parser(build)


MINIMAX_INPUT = ('Ok.<invoke name="search">\n<city>Paris "FR"</city>\n<days>3</days>\n<opts>\n<flag>true</flag>\n'
                 "</opts>\n<tags>\n<item>a</item>\n<item>b</item>\n</tags>\n</invoke>")


def test_minimax_m3_mapper() -> None:
    msg = peg_parse(minimax_parser(), MINIMAX_INPUT, format=ChatFormat.PEG_MINIMAX_M3)
    assert msg.content == "Ok."
    assert [tc.name for tc in msg.tool_calls] == ["search"]
    assert json.loads(msg.tool_calls[0].arguments) == {"city": 'Paris "FR"', "days": 3, "opts": {"flag": True},
                                                      "tags": ["a", "b"]}


def test_minimax_m3_streaming() -> None:
    arena = minimax_parser()
    prev = acc = ChatMessage()
    for i in range(1, len(MINIMAX_INPUT) + 1):
        cur = peg_parse(arena, MINIMAX_INPUT[:i], is_partial=i < len(MINIMAX_INPUT), format="peg-minimax-m3")
        acc = apply_deltas(acc, compute_deltas(prev, cur))
        assert acc == cur
        prev = cur
    cut = MINIMAX_INPUT.index("Paris") + 3
    assert peg_parse(arena, MINIMAX_INPUT[:cut], is_partial=True, format=ChatFormat.PEG_MINIMAX_M3).tool_calls == (
        ToolCall("search", '{"city":"Par'),)


def _brace_depth_by_hand(s: str) -> int:
    depth = 0
    in_string = escaped = False
    for c in s:
        if escaped:
            escaped = False
        elif c == "\\" and in_string:
            escaped = True
        elif c == '"':
            in_string = not in_string
        elif not in_string:
            depth += {"{": 1, "}": -1}.get(c, 0)
    return depth


@settings(max_examples=3000)
@given(st.text(alphabet='{}"\\a\n', max_size=40))
def test_json_brace_depth_skips_strings_finished_or_not(text: str) -> None:
    from autoparser.chat.mapper import json_brace_depth

    assert json_brace_depth(text) == _brace_depth_by_hand(text)


@settings(max_examples=3000)
@given(st.text(alphabet='a "\\\n\x00\x1f\x7f/é\u2028\udc80\udcff\ud800\t\x08', max_size=12))
def test_string_values_are_escaped_as_json_dumps_does(text: str) -> None:
    # escape_inner returns most texts unchanged without calling the encoder: it must agree with json.dumps
    # (undecodable bytes first replaced by U+FFFD) on exactly which texts those are
    from autoparser.chat.mapper import dump_string, escape_inner
    from autoparser.peg.utf8 import ESCAPED_BYTE

    expected = json.dumps(ESCAPED_BYTE.sub("\ufffd", text), ensure_ascii=False)
    assert dump_string(text) == expected
    assert escape_inner(text) == expected[1:-1]


def test_an_argument_after_a_closed_call_is_not_that_calls() -> None:
    """llama.cpp b11434 (common/chat-peg-parser.cpp) resets the mapper's current call when a call closes: before,
    an argument the parse reads after the closer was appended to the closed call's arguments. Here a parser
    reads a stray `<arg>` after `</call>`: the call keeps its own arguments, and the stray text is left out of
    it (the recovery's coverage gets it back as content)."""
    def build(p: ChatBuilder) -> P:
        arg = p.tool_arg(p.tool_arg_open(p.literal("<arg name=") + p.tool_arg_name(p.literal("x")) + p.literal(">"))
                         + p.tool_arg_json_value(p.json_number()) + p.tool_arg_close(p.literal("</arg>")))
        call = p.tool(p.tool_open(p.literal("<call ") + p.tool_name(p.literal("f")) + p.literal(">"))
                      + p.tool_args(p.zero_or_more(arg)) + p.tool_close(p.literal("</call>")))
        return call + p.optional(arg) + p.end()

    arena = build_chat_peg_parser(build)
    msg = strict(arena, "<call f><arg name=x>1</arg></call><arg name=x>2</arg>")
    assert [(c.name, json.loads(c.arguments)) for c in msg.tool_calls] == [("f", {"x": 1})]
