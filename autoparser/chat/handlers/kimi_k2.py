"""Kimi K2 (Thinking, Instruct and the older K2) (parsers/kimi-k2.cpp).

Calls sit in an optional `<|tool_calls_section_begin|>...<|tool_calls_section_end|>` section, each one
`<|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{json}<|tool_call_end|>`; the whole
`functions.NAME:IDX` is the call id. The model is loose with its own syntax (it may start calling tools
before closing `<think>`, or drop the end markers), so those parts are all optional. Why a handler: the call
id embeds the function name, and the analyzer reads a call id as a separate field.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from autoparser.analysis.reasoning import THINK_END, THINK_START
from autoparser.chat.constraint import Alt, CallTags, Json, Lit, Many, Opt, Pattern, Seq, Space, Tag, arguments_schema
from autoparser.chat.spec import (
    CALL_TRANSFORM,
    Build,
    FormatSpec,
    Laziness,
    Prefill,
    SchemaRule,
    response_fields,
    word,
)
from autoparser.chat.tools import Function, functions
from autoparser.peg.builder import P

SECTION_BEGIN = "<|tool_calls_section_begin|>"
SECTION_END = "<|tool_calls_section_end|>"
CALL_BEGIN = "<|tool_call_begin|>"
ARGS_BEGIN = "<|tool_call_argument_begin|>"
CALL_END = "<|tool_call_end|>"
GEN_PROMPT = "<|im_assistant|>assistant<|im_middle|>"


def detect(source: str) -> FormatSpec | None:
    return SPEC if SECTION_BEGIN in source and CALL_BEGIN in source else None


def _build(b: Build) -> P:
    p = b.p
    end = p.end()
    # reasoning may run straight into a tool call without `</think>`
    reasoning = p.optional(THINK_START + p.reasoning(p.until_one_of([THINK_END, SECTION_BEGIN, CALL_BEGIN]))
                           + p.optional(p.literal(THINK_END))) if b.extract_reasoning else p.eps()
    gen_prompt = p.literal(GEN_PROMPT)

    if not b.tool_calls:
        return gen_prompt + reasoning + p.content(p.rest()) + end

    tool_choice = p.choice()
    for f in functions(b.inputs.tools):
        tool_id = p.tool_id(p.literal("functions.") + p.tool_name(p.literal(f.name)) + p.literal(":")
                            + p.chars("[0-9]", 1, -1))
        # (relaxed, space_then: whitespace around the id and the arguments, which the template never writes)
        head = p.tool_open(p.space_then(tool_id) + p.space_then(p.arguments_marker(ARGS_BEGIN))) \
            + p.space_then(p.fenced_arguments(p.tool_args(p.schema(p.arguments_value(), f"tool-{f.name}-schema",
                                                                   f.schema))))
        tool_choice |= p.rule(f"tool-{f.name}", p.optionally_closed_call(head, CALL_END))

    # (relaxed: the first call's `<|tool_call_begin|>` may be left out; the call then begins `functions.NAME:`)
    tool_calls = p.rule("tool-calls", p.optional(p.literal(SECTION_BEGIN))
                        + p.trigger_rule("tool-call", p.calls_opened(CALL_BEGIN, tool_choice, *b.call_counts)
                                         + p.optional(p.space_then(p.literal(SECTION_END)))))
    # (relaxed: a section for each call, where the template writes one for all; after text it cannot read, the
    # reading resumes at a section's opener, which precedes its calls' own)
    tool_calls = p.call_sections(tool_calls, lambda: p.ref("tool-calls"), [SECTION_BEGIN])
    p.calls_begin_at([SECTION_BEGIN])
    # (relaxed: a call follows where its id and the arguments marker do, whatever the optional closer becomes)
    bare = [f"functions.{f.name}:" for f in functions(b.inputs.tools)]
    content_before_tools = p.content_until_calls([SECTION_BEGIN, CALL_BEGIN], bare, lambda: p.choice(
        [p.literal(t) for t in bare]) + p.chars("[0-9]", 1, -1) + p.literal(ARGS_BEGIN))
    return gen_prompt + reasoning + content_before_tools + tool_calls + end


# For transformers' parser: a call opens at its id `functions.NAME:IDX` (the name captured) and holds its JSON
# arguments; the section's opener goes with the first call's opener, its end is markup.
_CALLS = {"open_pattern": rf"(?:{re.escape(SECTION_BEGIN)}\s*)?{re.escape(CALL_BEGIN)}\s*functions\."
                          rf"(?P<name>[A-Za-z0-9_.\-]+?):\d+\s*{re.escape(ARGS_BEGIN)}",
          "close": CALL_END, "content": "json",
          "repeats": True, "transform": CALL_TRANSFORM}

def _call_tags(fns: Sequence[Function], parallel: bool) -> CallTags:
    """For the structural tag and Lark exports: a section of calls, each
    `<|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{json}<|tool_call_end|>`."""
    one = Tag(CALL_BEGIN, Alt(tuple(Seq((Space(), Lit(f"functions.{f.name}"), Pattern(":[0-9]+"), Lit(ARGS_BEGIN),
                                         Space(), Json(arguments_schema(f)), Space())) for f in fns)),
              CALL_END)
    calls = Seq((Space(), one, Opt(Many(Seq((Space(), one)))) if parallel else Seq(()), Space()))
    return CallTags(SECTION_BEGIN, (Tag(SECTION_BEGIN, calls, SECTION_END),), (CALL_END, SECTION_END))


SPEC = FormatSpec(
    "kimi_k2", _build, Prefill(GEN_PROMPT, THINK_START, THINK_END), laziness=Laziness.TOOLS_AUTO,
    response_format=SchemaRule.IGNORED, triggers=(word(CALL_BEGIN),), relaxes=True,
    response_fields=response_fields(_CALLS, thinking=(THINK_START, THINK_END), markup=(SECTION_END,)),
    call_tags=_call_tags,
    preserved_tokens=(SECTION_BEGIN, SECTION_END, CALL_BEGIN, ARGS_BEGIN, CALL_END, THINK_START, THINK_END),
    supports_thinking=True, thinking_start_tag=THINK_START, thinking_end_tags=(THINK_END,))
