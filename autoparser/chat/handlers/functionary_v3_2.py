"""Functionary v3.2 (`common_chat_params_init_functionary_v3_2`, parsers/functionary-v3-2.cpp).

Every message part names its recipient after `>>>`: `>>>all\\n` + content, or `>>>NAME\\n` + JSON arguments.
The generation prompt ends with `>>>`, so the model's output starts with the recipient. Why a handler: the
recipient line is the only thing that tells content from a call, and the analyzer knows no such field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autoparser.chat.request import Continuation, render_content
from autoparser.chat.spec import Build, FormatSpec, Laziness, Rendered, SchemaRule, pattern
from autoparser.chat.tools import functions
from autoparser.peg.builder import P

ASSISTANT_HEADER = "<|start_header_id|>assistant<|end_header_id|>\n\n"


def detect(source: str) -> FormatSpec | None:
    return SPEC if ">>>all" in source and ">>>${recipient}" in source else None


def _prefill(rendered: Rendered, msg: Mapping[str, Any], continuation: Continuation) -> str:
    # the content is written out whatever part of the message is continued
    return ASSISTANT_HEADER + ">>>all\n" + render_content(msg)


def _build(b: Build) -> P:
    p = b.p
    # With tools, content stops at the next ">>>" (a call); without, it runs to the end.
    # (operands in the C++ evaluation order, see cpp_sum, so that automaton rule ids match)
    content_until_tool = p.cpp_sum(lambda: p.literal("all\n"), lambda: p.content(p.until(">>>")))
    content_until_end = p.cpp_sum(lambda: p.literal("all\n"), lambda: p.content(p.rest()))
    gen_prompt = p.literal(ASSISTANT_HEADER + ">>>")

    if not b.tool_calls:
        return gen_prompt + content_until_end + p.end()

    tool_choice = p.choice()
    for f in functions(b.inputs.tools):
        tool_parser = p.tool(p.tool_open(p.tool_name(p.literal(f.name)) + p.literal("\n"))
                             + p.tool_args(p.schema(p.arguments_value(), f"tool-{f.name}-schema", f.schema)))
        tool_choice |= p.rule(f"tool-{f.name}", tool_parser)

    content_only = content_until_end
    tools_only = p.trigger_rule("tools", p.one_or_more(tool_choice))
    content_and_tools = content_until_tool + tools_only

    if b.required:
        if b.parallel:
            ret = p.choice([content_and_tools, tools_only]) + p.end()
        else:
            ret = p.choice([content_until_tool + tool_choice, tools_only]) + p.end()
    elif b.parallel:
        ret = p.choice([content_and_tools, content_only, tools_only]) + p.end()
    else:
        content_and_tool = content_until_tool + tool_choice
        ret = p.choice([content_and_tool, content_only, tool_choice]) + p.end()
    return gen_prompt + ret


SPEC = FormatSpec(
    "functionary_v3_2", _build, _prefill, laziness=Laziness.TOOLS_AUTO, response_format=SchemaRule.IGNORED,
    # any recipient other than "all" starts a tool call
    triggers=(pattern(">>>(?!all)"),), preserved_tokens=(">>>all",), reasoning=False)
