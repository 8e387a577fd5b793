"""LFM2 and LFM2.5 (parsers/lfm2.cpp).

Calls are python-style, `<|tool_call_start|>[name(k="v", n=1), ...]<|tool_call_end|>`, where argument values may
also use JSON literals (true/false/null); reasoning is an optional `<think>...</think>`. LFM2 lists the tools
between `<|tool_list_start|>` / `<|tool_list_end|>` tokens; LFM2.5 writes a plain "List of tools: [" and has
no such tokens to preserve. Both are detected here, LFM2 first, as in the C++. Why a handler: the analyzer now
derives these calls from a template's renders (analysis/forms.py), but not what this format adds to them: the
`thinking` field the messages carry, the tool-list tokens it preserves, reasoning only where the template knows
`<think>`; the C++ chat cases of LFM2 run through this format (retiring it is left to issue 18).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from autoparser.analysis.reasoning import THINK_END, THINK_START
from autoparser.chat.constraint import CallTags, python_calls
from autoparser.chat.spec import Build, FormatSpec, Prefill, SchemaRule, call_transform, response_fields, word
from autoparser.chat.tools import Function, functions
from autoparser.peg.builder import P

TOOL_CALL_START = "<|tool_call_start|>"
TOOL_CALL_END = "<|tool_call_end|>"
TOOL_LIST_START = "<|tool_list_start|>"
TOOL_LIST_END = "<|tool_list_end|>"
GEN_PROMPT = "<|im_start|>assistant\n"


def detect(source: str) -> FormatSpec | None:
    lfm2 = TOOL_LIST_START in source and TOOL_LIST_END in source
    lfm2_5 = "List of tools: [" in source and TOOL_LIST_START not in source
    if not (lfm2 or lfm2_5):
        return None
    # reasoning is extracted only from templates that know `<think>`
    return replace(SPEC, reasoning=THINK_START in source,
                   preserved_tokens=SPEC.preserved_tokens + ((TOOL_LIST_START, TOOL_LIST_END) if lfm2 else ()))


def _thinking_field(messages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The template reads reasoning from a `thinking` field."""
    out: list[Mapping[str, Any]] = []
    for message in messages:
        reasoning = message.get("reasoning_content")
        out.append(dict(message, thinking=reasoning) if isinstance(reasoning, str) else message)
    return out


def _build(b: Build) -> P:
    p = b.p
    gen_prompt = p.literal(GEN_PROMPT)
    end = p.end()
    reasoning = p.think(THINK_START, THINK_END, [TOOL_CALL_START] if b.tool_calls else []) if b.extract_reasoning \
        else p.eps()

    if not b.tool_calls:
        if b.response_format:
            return gen_prompt + reasoning + p.content(p.schema(p.json(), "response-format-schema",
                                                               b.inputs.json_schema)) + end
        return gen_prompt + reasoning + p.content(p.rest()) + end

    # (relaxed: the marker may be left out, and llama.cpp's list follows it at once where models may put a space)
    start = p.call_opener(TOOL_CALL_START, spaced=True)
    tool_calls = p.rule("tool-calls", p.trigger_rule("tool-call", start
                                                     + p.python_style_tool_calls(b.inputs.tools, b.parallel,
                                                                                 allow_json_literals=True)
                                                     + p.literal(TOOL_CALL_END)))
    # a list written without the marker begins `[NAME(`
    bare = [f"[{f.name}(" for f in functions(b.inputs.tools)]
    content = p.content_until_calls([TOOL_CALL_START], bare, lambda: tool_calls)
    return gen_prompt + reasoning + content + p.call_sections(tool_calls, lambda: tool_calls, [TOOL_CALL_START]) + end


# For transformers' parser: the list between the markers, read by `python-call-list` (which takes JSON's
# true/false/null too).
_CALLS = {"open": TOOL_CALL_START, "close": TOOL_CALL_END, "content": "python-call-list",
          "transform": call_transform("{name}", "{arguments}"),
          "transform_each": True}


def _call_tags(fns: Sequence[Function], parallel: bool) -> CallTags:
    """For the structural tag and Lark exports: `<|tool_call_start|>[NAME(k=v), ...]<|tool_call_end|>`, Python calls
    (`python_call`: values Python literals, or JSON under their schema)."""
    return python_calls(fns, parallel, TOOL_CALL_START, TOOL_CALL_END, list_wrapped=True, separator=",")


SPEC = FormatSpec(
    "lfm2", _build, Prefill(GEN_PROMPT, THINK_START, THINK_END), response_format=SchemaRule.OBJECT,
    messages=_thinking_field, triggers=(word(TOOL_CALL_START),),
    response_fields=response_fields(_CALLS, thinking=(THINK_START, THINK_END)),
    preserved_tokens=(TOOL_CALL_START, TOOL_CALL_END, THINK_START, THINK_END), supports_thinking=True, relaxes=True,
    thinking_start_tag=THINK_START, thinking_end_tags=(THINK_END,), call_tags=_call_tags)
