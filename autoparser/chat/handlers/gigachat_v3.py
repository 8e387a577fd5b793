"""GigaChat v3 (`common_chat_params_init_gigachat_v3`, parsers/gigachat-v3.cpp).

A tool call is a message part of its own after the content: `<|message_sep|>\\n\\nfunction call<|role_sep|>\\n`
then `{"name": ..., "arguments": {...}}`, one call at most. GigaChat 3.1 marks calls with `<|function_call|>` and
is left to the analyzer.

Why a handler: the analyzer reads the calls right (it parses every C++ case alike), but what llama.cpp hands the
engine comes from the tokenizer, which a template does not show: the preserved tokens are the two special
tokens the call marker is made of (`<|message_sep|>\\n\\n` and `<|role_sep|>\\n`), where the analyzer can only
offer the whole marker, which no tokenizer has as one token and llama.cpp would therefore ignore. The grammar is
the C++'s own too: the call follows its marker without spaces, and the trigger rule may take no call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autoparser.chat.request import Continuation, render_content
from autoparser.chat.spec import (
    Build,
    FormatSpec,
    Laziness,
    Rendered,
    SchemaRule,
    call_transform,
    response_fields,
    word,
)
from autoparser.chat.tools import functions
from autoparser.peg.builder import P

ASSISTANT_START = "assistant<|role_sep|>\n"
MESSAGE_SEP = "<|message_sep|>\n\n"
TOOL_CALL_START_PREFIX = MESSAGE_SEP + "function call<|role_sep|>\n"


def detect(source: str) -> FormatSpec | None:
    found = "<|role_sep|>" in source and "<|message_sep|>" in source and "<|function_call|>" not in source
    return SPEC if found else None


def _prefill(rendered: Rendered, msg: Mapping[str, Any], continuation: Continuation) -> str:
    # the content is written out whatever part of the message is continued (the format has no reasoning)
    return ASSISTANT_START + render_content(msg)


def _build(b: Build) -> P:
    p = b.p
    ret = p.eps()  # default-initialised first in the C++, which numbers the nodes
    if b.tool_calls:
        tool_choice = p.choice()
        # every tool with a function object counts, typed or not, as in the C++
        fs = functions(b.inputs.tools, typed=False)
        for f in fs:
            tool_name = p.json_member("name", '"' + p.tool_name(p.literal(f.name)) + '"')
            tool_args = p.json_member("arguments", p.tool_args(p.schema(p.arguments_value(), f"tool-{f.name}-schema", f.schema)))
            tool_open = p.tool_open(p.literal("{") << tool_name)
            tool_choice |= p.rule(f"tool-{f.name}", tool_open << "," << tool_args << "}")
        # the format has no way to write parallel calls
        min_calls = b.call_counts[0]
        # (relaxed: the call written loosely, other keys or string arguments, or without its marker, where the
        # content then ends at the call's `{"name"`)
        call = p.loose_json_calls(tool_choice, "name", "arguments", [f.name for f in fs])
        tool_call = p.rule("tool-call", p.call_opener(TOOL_CALL_START_PREFIX) + call)
        tool_calls = p.trigger_rule("tool-call-root", p.repeat(tool_call, min_calls, 1))
        content = p.content_until_calls([MESSAGE_SEP], ['{"name"'], lambda: call)
        ret = content << tool_calls
    else:
        ret = p.content(p.rest())
    return p.literal(ASSISTANT_START) + ret


SPEC = FormatSpec(
    "gigachat_v3", _build, _prefill, laziness=Laziness.TOOLS_AUTO, response_format=SchemaRule.IGNORED,
    triggers=(word(TOOL_CALL_START_PREFIX),), preserved_tokens=(MESSAGE_SEP, "<|role_sep|>\n"), relaxes=True,
    reasoning=False, calls_as_analysed=True,
    # the call is one JSON object after its marker, which ends it
    response_fields=response_fields({"content": "json", "open": TOOL_CALL_START_PREFIX.strip(),
                                     "transform": call_transform("{content.name}", "{content.arguments}"),
                                     "repeats": True}))
