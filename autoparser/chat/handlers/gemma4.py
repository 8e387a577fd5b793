"""Gemma 4 (parsers/gemma4.cpp).

Reasoning is a `<|channel>thought ... <channel|>` block; calls are `<|tool_call>call:NAME{k:v,...}<tool_call|>`
with strings quoted as `<|"|>...<|"|>` and bare dict keys, which the PEG_GEMMA4 mapper turns into JSON by
walking the `gemma4-*` rules. Older Gemma 4 templates (without the "OpenAI Chat Completions" comment) expect
tool results folded into the assistant turn as a `tool_responses` field. Why a handler: the argument syntax is
neither JSON nor tagged, and reasoning blocks may repeat around the content.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from autoparser.chat.builder import ChatBuilder
from autoparser.chat.constraint import Alt, CallTags, Json, Lit, Many, Opt, Piece, Seq, Tag, Text, value_schema
from autoparser.chat.inputs import GenerationInputs
from autoparser.chat.request import Continuation, render_content
from autoparser.chat.spec import CALL_TRANSFORM, Build, FormatSpec, Rendered, SchemaRule, response_fields, word
from autoparser.chat.tags import SCAN_TO_CALLS
from autoparser.chat.tools import Function, functions, parameters
from autoparser.errors import ExportError
from autoparser.peg.builder import P
from autoparser.types import ChatFormat

TURN = "<|turn>model\n"


def detect(source: str) -> FormatSpec | None:
    if "'<|tool_call>call:'" not in source:
        return None
    # newer templates take the tool results as they come (OpenAI Chat Completions style)
    return SPEC if "{#- OpenAI Chat Completions:" in source else replace(SPEC, messages=convert_tool_responses)


def _has_content(msg: Mapping[str, Any]) -> bool:
    content = msg.get("content")
    return (isinstance(content, str) and bool(content)) or (isinstance(content, list) and bool(content))


def _has_tool_calls(msg: Mapping[str, Any]) -> bool:
    calls = msg.get("tool_calls")
    return isinstance(calls, list) and bool(calls)


def _tool_response(msg: Mapping[str, Any]) -> Any:
    if "content" not in msg:
        return None
    content = msg["content"]
    if isinstance(content, str):
        try:
            return json.loads(content)
        except ValueError:
            return content
    return content


def convert_tool_responses(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """`workaround::convert_tool_responses_gemma4`: fold `assistant(calls) tool+ [assistant(content)]` into one
    assistant message carrying `tool_responses` (name + parsed response of each result)."""
    out: list[dict[str, Any]] = []
    i = 0
    while i < len(messages):
        msg = messages[i]
        if msg.get("role", "") != "assistant" or not _has_tool_calls(msg):
            out.append(dict(msg))
            i += 1
            continue
        tool_calls = list(msg["tool_calls"])
        reasoning = msg.get("reasoning_content") if isinstance(msg.get("reasoning_content"), str) else None
        i += 1
        responses: list[dict[str, Any]] = []
        while i < len(messages) and messages[i].get("role", "") == "tool":
            result = messages[i]
            name = ""
            if len(responses) < len(tool_calls):
                call = tool_calls[len(responses)]
                if isinstance(call, Mapping) and isinstance(call.get("function"), Mapping):
                    name = str(call["function"].get("name", ""))
            if not name:
                name = str(result.get("tool_call_id", ""))
            responses.append({"name": name, "response": _tool_response(result)})
            i += 1
        content: Any = None
        if i < len(messages) and messages[i].get("role", "") == "assistant":
            following = messages[i]
            if not _has_tool_calls(following) and _has_content(following):
                content = following["content"]
                i += 1
        merged: dict[str, Any] = {"role": "assistant", "tool_calls": tool_calls}
        if responses:
            merged["tool_responses"] = responses
        if content is not None:
            merged["content"] = content
        if reasoning is not None:
            merged["reasoning_content"] = reasoning
        out.append(merged)
    return out


def _reopened_turn(rendered: Rendered, inputs: GenerationInputs) -> Rendered:
    """After content and a tool call the template leaves the model turn closed; reopen it, or the model skips
    its reasoning channel."""
    if inputs.add_generation_prompt and rendered.prompt.endswith("<turn|>\n"):
        return replace(rendered, prompt=rendered.prompt + TURN, generation_prompt=TURN)
    return rendered


def _prefill(rendered: Rendered, msg: Mapping[str, Any], continuation: Continuation) -> str:
    gp = TURN if rendered.prompt.endswith("<turn|>\n") else ""
    gp += "<|channel>thought\n" + str(msg.get("reasoning_content") or "")
    if continuation == Continuation.CONTENT:
        gp += "<channel|>" + render_content(msg)
    return gp


def _value_rules(p: ChatBuilder) -> None:
    """The `gemma4-*` rules: Gemma's JSON-like value syntax (names matter: the mapper walks them)."""
    # (operands made right to left, as GCC builds the C++ expressions: rule names embed node ids)
    p.rule("gemma4-string-content", p.until('<|"|>'))
    quote = p.literal('<|"|>')
    content = p.ref("gemma4-string-content")
    p.rule("gemma4-string", p.literal('<|"|>') + content + quote)
    p.rule("gemma4-bool", p.json_bool())
    p.rule("gemma4-null", p.json_null())
    p.rule("gemma4-number", p.json_number())
    colon = p.literal(":")
    p.rule("gemma4-dict-key", p.rule("gemma4-dict-key-name", p.chars("[^:}]", 1, -1)) + colon)
    value = p.ref("gemma4-value")
    space = p.space()
    p.rule("gemma4-dict-kv", p.ref("gemma4-dict-key") + space + value)

    def dict_body() -> P:
        ws = p.space()
        member = p.ref("gemma4-dict-kv")
        # (relaxed, member_separator: the comma left out before a key, hybridgroup/yzma PR #243)
        members = p.sequence([member, p.zero_or_more(p.sequence([p.member_separator(","), ws, member]))])
        return p.sequence([p.literal("{"), ws, p.choice([p.literal("}"), p.sequence([members, ws, p.literal("}")])])])

    def array_body() -> P:
        ws = p.space()
        value = p.ref("gemma4-value")
        elements = p.sequence([value, p.zero_or_more(p.sequence([p.literal(","), ws, value]))])
        return p.sequence([p.literal("["), ws, p.choice([p.literal("]"), p.sequence([elements, ws, p.literal("]")])])])

    p.rule("gemma4-dict", dict_body)
    p.rule("gemma4-array", array_body)
    p.rule("gemma4-value", lambda: p.value_choice([
        p.ref("gemma4-string"), p.ref("gemma4-dict"), p.ref("gemma4-array"),
        p.ref("gemma4-number"), p.ref("gemma4-bool"), p.ref("gemma4-null")], "gemma4", '<|"|>'))


def _paren_rules(p: ChatBuilder) -> str:
    """The `gemma4-paren-*` rules (relaxed only): a call's arguments in parentheses, each key ended by `:` or by
    `=`, the values Gemma's own (`gemma4-value`); the mapper reads them as `gemma4-dict`. Returns the dict's
    rule name."""
    def kv() -> P:
        key = p.rule("gemma4-paren-key-name", p.chars("[^:=(), \t\r\n]", 1, -1))
        return p.rule("gemma4-paren-key", key + p.space() + p.choice([p.literal(":"), p.literal("=")])) \
            + p.space() + p.ref("gemma4-value")

    def body() -> P:
        member = p.rule("gemma4-paren-kv", kv)
        members = member + p.zero_or_more(p.space() + p.literal(",") + p.space() + member)
        return p.literal("(") + p.space() + p.optional(members + p.space()) + p.literal(")")

    p.rule("gemma4-paren-dict", body)
    return "gemma4-paren-dict"


def _build(b: Build) -> P:
    p = b.p
    start = p.rule("start", p.optional(p.literal("<|turn>model\n")))

    # Nodes are made in the order GCC builds the C++ expressions (the operands of `a + b`, `a | b`, `a << b`
    # right to left), as grammar rule names embed node ids.
    def thought_block() -> P:
        close = p.literal("<channel|>")
        body = p.reasoning(p.until("<channel|>")) if b.extract_reasoning else p.until("<channel|>")
        space = p.space()
        return p.labelled_marker("<|channel>", "thought") + space + body + close

    if b.extract_reasoning:  # (relaxed: a call ends a thought never closed, also one without its opener)
        starts = ["<|tool_call>", *p.bare_call_starts([f"call:{f.name}{{" for f in functions(b.inputs.tools)])]
        p.rule("thought", p.reasoning_between(thought_block, "<|channel>thought", "<channel|>",
                                              starts if b.tool_calls else [], spaced=True,
                                              opener=lambda: p.labelled_marker("<|channel>", "thought")))
    else:
        p.rule("thought", p.content(thought_block()))

    # empty `<|channel>` openers the model sometimes repeats before the thought; the grammar ignores them
    consume_empty_channels = p.gbnf(p.empty_markers("<|channel>", "thought"), "")
    no_channel = p.negate(p.literal("<|channel>"))
    thought_ref = p.ref("thought")
    thought = (p.peek(p.literal("<|channel>")) + consume_empty_channels + thought_ref) | no_channel

    if b.response_format:
        fence_close = p.literal("```")
        schema = p.content(p.schema(p.json(), "response-format-schema", b.inputs.json_schema))
        return start + p.optional(thought) + (p.literal("```json") << schema << fence_close)

    if b.tool_calls:
        _value_rules(p)
        tool_choice = p.choice()
        for f in functions(b.inputs.tools):
            def declared(opener: str, args: str, name: str = f.name) -> P:
                brace = p.peek(p.literal(opener))
                return p.tool(p.sequence([p.tool_open(p.tool_name(p.literal(name)) + brace), p.tool_args(p.ref(args))]))

            # (relaxed: the arguments in parentheses, `call:NAME(k:v)` or `call:NAME(k=v)`, as Gemma 4 models write
            # them under load: vLLM issue #53642 and PRs #53444, #53657, oMLX PR #1886)
            tool_choice |= p.rule(f"tool-{f.name}", p.written_otherwise(
                lambda: declared("{", "gemma4-dict"), lambda: declared("(", _paren_rules(p)), "", "call_parentheses"))
        # (relaxed: a call to a tool the request does not declare, `call:NAME{...}`)
        for undeclared in p.undeclared_call(lambda name: p.tool(p.sequence([
                p.tool_open(name + p.peek(p.literal("{"))), p.tool_args(p.ref("gemma4-dict"))]))):
            tool_choice |= undeclared
        # (relaxed: the model may leave out the first `<|tool_call>`: that call then begins with `call:NAME{`;
        # and write several calls in one `<|tool_call>...<tool_call|>`; or the opener's `call` label, writing
        # `<|tool_call>:NAME{...}`, as Gemma 4 26B A4B does: vLLM issue #53431, PR #53444)
        # (relaxed, space_then: whitespace before the closer)
        def call() -> P:
            head = p.written_otherwise(lambda: p.literal("call:"), lambda: p.literal(":"), "", "marker_label")
            return p.grouped_calls(head + tool_choice) + p.space_then(p.literal("<tool_call|>"))

        tool_call = p.trigger_rule("tool-call", p.calls_with_first_opener(
            lambda: p.repeat("<|tool_call>call:" + tool_choice + "<tool_call|>", *b.call_counts),
            "<|tool_call>", call, *b.call_counts))
        bare = [f"call:{f.name}{{" for f in functions(b.inputs.tools)]
        if b.required:
            return start + thought + tool_call
        scan_to_toolcall = p.rule(SCAN_TO_CALLS, p.until_one_of(["<|tool_call>", *p.bare_call_starts(bare)]))
        content = p.rule("content", p.content_until_calls(["<|channel>", "<channel|>", "<|tool_call>"], bare, call))
        message = p.rule("message", thought + content)
        return start + p.zero_or_more(message) + scan_to_toolcall + tool_call

    # Gemma 4 may close with a spare `<|channel>thought\n<channel|>` or a lone `<channel|>`: take every whole
    # reasoning block, then stop at the first unmatched `<channel|>`.
    content = p.rule("content", p.content(p.until_one_of(["<|channel>", "<channel|>"])))
    message = p.rule("message", thought + content)
    return start + p.one_or_more(message)


# For transformers' parser: `call:NAME{k:<|"|>v<|"|>}` is JSON with bare keys and `<|"|>` quotes, which its
# `json` parser reads with those two dialect knobs.
_CALLS = {"open_pattern": r"<\|tool_call>call:(?P<name>[A-Za-z0-9_.\-]+)(?=\{)",
          "close": "<tool_call|>",
          "content": "json", "content_args": {"unquoted_keys": True, "string_delims": [['<|"|>', '<|"|>']]},
          "repeats": True, "transform": CALL_TRANSFORM}

QUOTE = '<|"|>'


def _call_tags(fns: Sequence[Function], parallel: bool) -> CallTags:
    """For the structural tag and Lark exports: each call `<|tool_call>call:NAME{k:v,...}<tool_call|>`, its
    arguments in any order, a string value between `<|"|>` quotes, a number or a boolean as JSON writes it.
    (An object or a list value is in the format's own syntax, which no JSON schema constrains: not said.)"""
    calls: list[Piece] = []
    for f in fns:
        args: list[Piece] = []
        for param in parameters(f):
            if param.types & {"object", "array"} or not param.types:
                raise ExportError(f"{f.name}.{param.name}: an object or list value is written in Gemma 4's own "
                                  "syntax, which a JSON schema does not constrain")
            value = Tag(QUOTE, Text(), QUOTE) if param.types <= {"string"} else Json(value_schema(param))
            args.append(Seq((Lit(f"{param.name}:"), value)))
        listed = Opt(Seq((Alt(tuple(args)), Opt(Many(Seq((Lit(","), Alt(tuple(args))))))))) if args else Seq(())
        calls.append(Seq((Lit(f"call:{f.name}{{"), listed, Lit("}"))))
    return CallTags("<|tool_call>", (Tag("<|tool_call>", Alt(tuple(calls)), "<tool_call|>"),), ("<tool_call|>",),
                    hand_over=("<|tool_response>",))


SPEC = FormatSpec(
    "gemma4", _build, _prefill, format=ChatFormat.PEG_GEMMA4, response_format=SchemaRule.OBJECT,
    fix_prompt=_reopened_turn, triggers=(word("<|tool_call>"),), relaxes=True,
    # (the turn of a call ends by handing over to the tool: `<|tool_response>` is no content)
    response_fields=response_fields(_CALLS, thinking=("<|channel>thought", "<channel|>"),
                                        markup=("<|tool_response>",)), call_tags=_call_tags,
    preserved_tokens=("<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", "<|turn>"),
    supports_thinking=True, thinking_start_tag="<|channel>thought", thinking_end_tags=("<channel|>",),
    message_delimiters=(("user", "<|turn>user"), ("assistant", "<|turn>model")))
