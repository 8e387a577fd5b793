"""Ling 3.0 / Bailing V3 (parsers/ling3.cpp).

Turns are `<role>X</role>` sections; calls are GLM-like,
`<tool_call>NAME<arg_key>k</arg_key>\\n<arg_value>v</arg_value>...</tool_call>`. With thinking on, the generation
prompt already opens `<think>`, so the model never writes it and may start a call before `</think>`: reasoning
then ends at `</think>` or `<tool_call>`. With thinking off the template closes the block itself and all output
is content. With a response format (llama.cpp b11434) the think block must close before the JSON, and the grammar
is not lazy. The model sometimes spells `<|role_end|>` out as text, hence the extra stop string. Why a handler:
whether reasoning may end at a call depends on what the generation prompt left open, which the analyzer's
one-marker reasoning model does not express.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from autoparser.analysis.reasoning import THINK_END, THINK_START
from autoparser.chat.builder import ChatBuilder
from autoparser.chat.request import Continuation
from autoparser.chat.spec import (
    CALL_TRANSFORM,
    Build,
    FormatSpec,
    Prefill,
    response_fields,
    word,
)
from autoparser.chat.tools import Function, Parameter, functions
from autoparser.peg.builder import P

ROLE = "<role>ASSISTANT</role>"
CALL_START = "<tool_call>"
CALL_END = "</tool_call>"
ARG_KEY = "<arg_key>"
ARG_KEY_END = "</arg_key>"
ARG_VAL = "<arg_value>"
ROLE_END = "<|role_end|>"
ARG_VAL_END = "</arg_value>"
TOOLS_RULE = "ling3-tool-call"


def detect(source: str) -> FormatSpec | None:
    # `<role>` sections set this family apart from the other `<arg_key>` templates (GLM)
    return SPEC if ROLE in source and ARG_KEY in source else None


def _think_open(b: Build) -> bool:
    """Is a think block left open for the model (by the generation prompt or the continued message)?"""
    if b.inputs.has_continuation:
        return b.inputs.continuation != Continuation.CONTENT
    last_open = b.generation_prompt.rfind(THINK_START)
    last_close = b.generation_prompt.rfind(THINK_END)
    return last_open >= 0 and (last_close < 0 or last_open > last_close)


def _build(b: Build) -> P:
    p = b.p
    think_open = _think_open(b)
    end = p.end()
    # the parse input starts with the generation prompt, whose assistant opener is consumed here
    opener = p.optional(p.literal(ROLE) + p.optional(p.space()))

    # (relaxed: an open think block also ends where a call written without its opener begins, `NAME<arg_key>`)
    bare = [f"{f.name}{ws}{ARG_KEY}" for f in functions(b.inputs.tools) for ws in ("", "\n")] \
        if b.tool_calls else []
    body_end = p.until_one_of([THINK_END, CALL_START, *p.bare_call_starts(bare)]) if think_open \
        else p.until_one_of([THINK_END])
    think_body = p.reasoning(body_end) if b.extract_reasoning else p.content(body_end)

    def think_block() -> P:
        return p.optional(p.literal(THINK_START)) + think_body + p.optional(p.literal(THINK_END))

    if think_open or not b.extract_reasoning:
        reasoning = p.optional(think_block())
    else:  # (relaxed: a block the model opens itself also ends at a call, as one the prompt opened does; so does
        # one it writes without its start, which llama.cpp's optional start reads to the end of the output)
        # (the optional inside: a reading that ends the reasoning where it begins is a repair all the same)
        reasoning = p.reasoning_between(lambda: p.optional(think_block()), THINK_START, THINK_END,
                                        [CALL_START, *p.bare_call_starts(bare)] if b.tool_calls else [],
                                        opener=lambda: p.optional(p.literal(THINK_START)))

    # (relaxed: a `<tool_call>` no tool's name follows is the opener mentioned in the text, and the content goes
    # on past it: the end-of-turn tail below would otherwise take the calls after it as content; a call that
    # begins right, cut or not, still ends the content)
    def call_or_named_opener() -> P:  # (made only by the relaxed builder: llama.cpp's grammar is unchanged)
        names = p.choice([p.literal(f.name) for f in functions(b.inputs.tools)])
        # (the opener and a name first: decided at once, where a whole call of a cut output is not yet)
        return p.literal(CALL_START) + p.optional(p.space()) + names | p.ref(TOOLS_RULE)

    content = p.optional(p.content_until_calls([CALL_START], [*bare, CALL_START] if bare else [],
                                               call_or_named_opener))
    # a trailing end-of-turn token is eaten rather than left in the content
    tail = p.optional(p.content(p.until(ROLE_END))) + p.optional(p.literal(ROLE_END))

    if b.response_format:
        # (b11434) the think block must close before the JSON, so the turn cannot end inside the reasoning
        closed_reasoning = p.literal(THINK_START) + think_body + p.literal(THINK_END)
        response_format = p.content(p.schema(p.json(), "response-format", b.inputs.json_schema))
        return opener + (closed_reasoning << response_format) + end

    if not b.tool_calls:
        return opener + reasoning + tail + end

    tool_choices = p.choice()
    arg_close = p.tool_arg_close(p.value_closer(ARG_VAL_END))
    arg_string = p.rule("ling3-arg-string", p.tool_arg_string_value(p.until(ARG_VAL_END)) + arg_close)

    def arg(f: Function, param: Parameter) -> P:
        rule_name = f"ling3-arg-{f.name}-{param.name}"
        # each alternative takes the closing tag too, so a JSON prefix cannot decide the choice early
        arg_value = p.typed_value(param, rule_name + "-schema", f.schema, arg_close, arg_string,
                                  partial(_mixed_value, p, param, rule_name + "-schema", f.schema, arg_close,
                                          arg_string))
        # the model puts newlines between arguments, the template's history does not (relaxed: the key's opener or
        # the value's left out, as in GLM's form: `loose_tagged_call`; built inline, where the strict node is)
        return p.rule(rule_name, p.optional(p.space())
                      + p.tool_arg(p.tool_arg_open(p.written_otherwise(lambda: p.literal(ARG_KEY), p.eps, "",
                                                                       "missing_argument_opener")
                                                   + p.tool_arg_name(p.literal(param.name)) + p.literal(ARG_KEY_END))
                                   + p.written_otherwise(lambda: p.optional(p.space()) + p.literal(ARG_VAL),
                                                         lambda: p.optional(p.space()), "", "missing_value_opener")
                                   + arg_value))

    for f in functions(b.inputs.tools):
        name = f.name
        required_args, optional_args = p.args_by_requirement(f, arg)

        args = p.args_permuted(f"ling3-{name}-args", required_args, optional_args)
        # (relaxed: a call's opener may be left out)
        call = p.tool(p.tool_open(p.call_opener(CALL_START) + p.tool_name(p.literal(name)) + p.optional(p.space()))
                      + p.tool_args(args) + p.tool_close(p.optional(p.space()) + p.literal(CALL_END)))
        tool_choices |= p.rule(f"ling3-tool-{name}", call)

    # (relaxed: where the request allows one call, a second one is read and reported; the section's tail would
    # take it as content, with no word said)
    calls = tool_choices + p.zero_or_more(p.space() + tool_choices) if b.parallel \
        else p.extra_calls(tool_choices, tool_choices)
    tools_section = p.trigger_rule(TOOLS_RULE, calls + p.space() + p.optional(p.content(p.until(ROLE_END)))
                                   + p.optional(p.literal(ROLE_END)))
    tool_calls = tools_section if b.required else p.optional(tools_section)
    return opener + reasoning + content + tool_calls + tail + end


def _mixed_value(p: ChatBuilder, param: Parameter, schema_rule: str, schema: Any, close: P, raw: P) -> P:
    """JSON first, so the value comes out typed; the grammar only keeps the raw string."""
    return p.gbnf(p.atomic(p.tool_arg_json_value(p.schema(p.json(), schema_rule, schema, pointer=param.pointer))
                           + close) | raw, "ling3-arg-string")


# For transformers' parser: `<tool_call>NAME` opens a call, its `<arg_key>`/`<arg_value>` pairs read by
# `xml-inline`.
_CALLS = {"open_pattern": r"<tool_call>\s*(?P<name>[^<\s]+)", "close": CALL_END, "content": "xml-inline",
          "content_args": {"tag_pattern": r"<arg_key>(?P<key>.*?)</arg_key>\s*<arg_value>(?P<value>.*?)</arg_value>",
                           "value_parser": {"name": "text"}},
          "repeats": True, "transform": CALL_TRANSFORM}

SPEC = FormatSpec(
    "ling3", _build, Prefill(ROLE + "\n", THINK_START, THINK_END), triggers=(word(CALL_START),), relaxes=True,
    response_fields=response_fields(_CALLS, thinking=(THINK_START, THINK_END)), calls_as_analysed=True,
    preserved_tokens=(THINK_START, THINK_END, CALL_START, CALL_END, ARG_KEY, ARG_KEY_END, ARG_VAL, ARG_VAL_END,
                      ROLE_END),
    additional_stops=(ROLE_END,), supports_thinking=True, thinking_start_tag=THINK_START,
    thinking_end_tags=(THINK_END, CALL_START),
    message_delimiters=(("assistant", ROLE), ("user", "<role>HUMAN</role>"),
                        ("tool", "<role>OBSERVATION</role>"), ("system", "<role>SYSTEM</role>")))
