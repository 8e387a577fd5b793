"""DeepSeek V3.2 and V4 (parsers/deepseek.cpp).

Calls are DSML markup: `<｜DSML｜function_calls>` (V4: `tool_calls`) holding `<｜DSML｜invoke name="NAME">` elements
with one `<｜DSML｜parameter name="K" string="true|false">V</｜DSML｜parameter>` per argument (string="true" for
raw text, else JSON). With thinking on, the model may go from reasoning straight into a call block, so the
call-block opener also ends reasoning. V4 renders tool results in call order, and its non-thinking
generation prompt ends in a bare `</think>`. Why a handler: the markup token is assigned to a template variable
rather than written out, and string-ness is an attribute of each parameter, neither of which the analyzer's
renders can show.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from autoparser.analysis.reasoning import THINK_END, THINK_START
from autoparser.chat.builder import ChatBuilder
from autoparser.chat.constraint import (
    Alt,
    CallTags,
    Json,
    Lit,
    Many,
    Opt,
    Piece,
    Seq,
    Space,
    Tag,
    Text,
    by_kind,
    value_schema,
)
from autoparser.chat.inputs import GenerationInputs
from autoparser.chat.request import Continuation, render_content
from autoparser.chat.spec import (
    CALL_TRANSFORM,
    Build,
    FormatSpec,
    Laziness,
    Rendered,
    SchemaRule,
    response_fields,
    word,
)
from autoparser.chat.tools import Function, functions, parameters
from autoparser.peg.builder import P

DSML = "｜DSML｜"
GEN_PROMPT = "<｜Assistant｜>"
TC_SEPARATOR = "\n\n"


def detect(source: str) -> FormatSpec | None:
    # The token is assigned to a template variable (`dsml_token`), not written out in the markup.
    if not ("dsml_token" in source and "DSML" in source and ("function_calls" in source or "tool_calls" in source)):
        return None
    return V3_2 if "function_calls" in source else V4


def sort_tool_results(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """V4 renders a run of user/tool messages as one block, tool results in the order of the calls that
    produced them (matched by call id); reorder the results within each run accordingly (stable)."""
    adjusted = [dict(m) for m in messages]
    call_order: dict[str, int] = {}
    i = 0
    while i < len(adjusted):
        msg = adjusted[i]
        role = msg.get("role", "")
        calls = msg.get("tool_calls")
        if role == "assistant" and isinstance(calls, list) and calls:
            call_order = {}
            for idx, call in enumerate(calls):
                call_id = call.get("id", "") if isinstance(call, Mapping) else ""
                if call_id:
                    call_order[str(call_id)] = idx
            i += 1
            continue
        if role not in ("user", "tool"):
            i += 1
            continue
        positions: list[int] = []
        run_end = i
        while run_end < len(adjusted):
            r = adjusted[run_end].get("role", "")
            if r == "tool":
                positions.append(run_end)
            elif r != "user":
                break
            run_end += 1
        if len(positions) > 1 and call_order:
            results = sorted((adjusted[k] for k in positions),
                             key=lambda m: call_order.get(str(m.get("tool_call_id", "")), 0))
            for k, result in zip(positions, results):
                adjusted[k] = result
        i = run_end
    return adjusted


def _response_format(inputs: GenerationInputs) -> Mapping[str, Any] | None:
    """V4 renders the requested response format into its system prompt."""
    return {"response_format": inputs.json_schema} if isinstance(inputs.json_schema, dict) else None


def _prefill(rendered: Rendered, msg: Mapping[str, Any], continuation: Continuation, *, v4: bool) -> str:
    reasoning_content = str(msg.get("reasoning_content") or "")
    if v4 and not reasoning_content:
        gp = GEN_PROMPT + THINK_END
        if continuation == Continuation.CONTENT:
            gp += render_content(msg)
        return gp
    gp = GEN_PROMPT + THINK_START + reasoning_content
    if continuation == Continuation.CONTENT:
        gp += THINK_END + render_content(msg)
    return gp


def _tool_choice(b: Build) -> P:
    p = b.p
    invoke_start = f"<{DSML}invoke"
    invoke_end = f"</{DSML}invoke>"
    param_start = f"<{DSML}parameter"
    param_end = f"</{DSML}parameter>"
    tool_choice = p.choice()

    def any_arg(is_string: bool) -> P:  # (relaxed: an argument the schema does not list; a value by its attribute)
        value = p.tool_arg_string_value(p.until(param_end)) if is_string else p.tool_arg_json_value(p.json())
        kind = p.literal(f'" string="{"true" if is_string else "false"}">')
        key = p.tool_arg_name(p.until('"'))
        return p.tool_arg(p.tool_arg_open(p.literal(param_start + ' name="') + key + kind) + value
                          + p.tool_arg_close(p.value_closer(param_end)))

    # Nodes are made in the order GCC builds the C++ expressions (the operands of `a + b` right to left), as
    # grammar rule names embed node ids: a close before its value, a value before its opener.
    for f in functions(b.inputs.tools):
        required: list[P] = []
        optional: list[P] = []
        for param in parameters(f):
            is_string = param.may_be_string
            close = p.tool_arg_close(p.value_closer(param_end))
            value = p.tool_arg_string_value(p.until(param_end)) if is_string else p.tool_arg_json_value(
                p.schema(p.json(), f"tool-{f.name}-arg-{param.name}-schema", f.schema, pointer=param.pointer))
            kind = p.literal(f'" string="{"true" if is_string else "false"}">')
            name = p.tool_arg_name(p.literal(param.name))
            arg = p.tool_arg(p.tool_arg_open(p.literal(param_start + ' name="') + name + kind) + value + close)
            (required if param.required else optional).append(p.rule(f"tool-{f.name}-arg-{param.name}", arg))
        optional += p.undeclared_arg(lambda: p.choice([any_arg(True), any_arg(False)]), f.schema)
        args = p.tagged_arguments(p.args_in_order(required, optional))
        close = p.tool_close(p.literal(invoke_end))
        space = p.space()
        tail = p.call_part_marker('">\n')  # (relaxed: any whitespace after it, or none)
        name = p.tool_name(p.literal(f.name))
        func = p.tool(p.tool_open(p.literal(invoke_start + ' name="') + name + tail) + args + space + close)
        if not required:  # (relaxed: an invoke without arguments as one self-closing element)
            func = p.written_otherwise(partial(_as_written, func), partial(_self_closed, p, invoke_start, f.name), "",
                                       "self_closing_call")
        tool_choice |= p.rule(f"tool-{f.name}", func)

    def undeclared(name: P) -> P:  # (relaxed: a call to a tool the request does not declare, any argument)
        args = p.tagged_arguments(p.zero_or_more(p.space() + p.choice([any_arg(True), any_arg(False)])))
        return p.tool(p.tool_open(p.literal(invoke_start + ' name="') + name + p.call_part_marker('">\n')) + args
                      + p.space() + p.tool_close(p.literal(invoke_end)))

    for call in p.undeclared_call(undeclared):
        tool_choice |= call
    return tool_choice


def _as_written(call: P) -> P:
    return call


def _self_closed(p: ChatBuilder, invoke_start: str, name: str) -> P:
    """`<DSML invoke name="NAME"/>`: a call without arguments as one element, which the template writes
    `<DSML invoke name="NAME">\n</DSML invoke>`; DeepSeek-V4 writes it so for a parameterless tool in about 5% of
    SWE-bench trials (sgl-project/sglang PR #23915, whose DSML tests read it as NAME with {})."""
    return p.tool(p.tool_open(p.literal(invoke_start + ' name="') + p.tool_name(p.literal(name)) + p.literal('"/>'))
                  + p.tagged_arguments(p.eps()) + p.tool_close(p.eps()))


def _build(b: Build, *, v4: bool) -> P:
    p = b.p
    tc_block = "tool_calls" if v4 else "function_calls"
    fc_start = f"<{DSML}{tc_block}>"
    fc_end = f"</{DSML}{tc_block}>"

    gen_prompt = p.literal(GEN_PROMPT)
    end = p.end()

    # the call section comes first: reasoning may run straight into it
    tool_choice = _tool_choice(b) if b.tool_calls else p.choice()
    obligatory_tool_calls = p.call_block(fc_start, tool_choice, fc_end, parallel=b.parallel, required=True)
    # (relaxed: the section opener may be left out, call_block; the first call then begins `<DSML invoke name="NAME"`)
    bare = [f'<{DSML}invoke name="{f.name}"' for f in functions(b.inputs.tools)]
    p.calls_begin_at(bare)  # (each invoke is a call: after one it cannot read, reading resumes at the next)
    reasoning = p.eps()
    reasoning_with_tc = p.eps()
    allow_reasoning_with_tc = False
    tool_calls = obligatory_tool_calls if b.required else p.optional(obligatory_tool_calls)
    if b.extract_reasoning and b.inputs.enable_thinking:
        reasoning = p.think(THINK_START, THINK_END)
        space = p.space()  # (made before the left operand, as GCC evaluates the C++ expression)
        reasoning_with_tc = THINK_START + p.reasoning(p.until_one_of([TC_SEPARATOR + fc_start, fc_start, THINK_END,
                                                                   *p.bare_call_starts(bare)])) \
            + space + obligatory_tool_calls
        allow_reasoning_with_tc = True
    elif b.extract_reasoning:
        # thinking off: the generation prompt still holds `<think></think>` (V3.2) or `</think>` (V4)
        reasoning = p.optional(p.literal(THINK_END)) if v4 \
            else p.optional(p.literal(THINK_START) + p.until(THINK_END) + p.literal(THINK_END))

    if b.response_format:
        return gen_prompt + reasoning + p.fenced_json(b.inputs.json_schema) + end

    if not b.tool_calls:
        return gen_prompt + reasoning + p.content(p.rest()) + end

    space = p.space()  # (operands made right to left, as GCC evaluates the C++ expression)
    content = p.content_until_calls([TC_SEPARATOR + fc_start, fc_start], bare, lambda: obligatory_tool_calls)
    content_before_tools = p.negate(p.literal(THINK_START)) + content + space
    if allow_reasoning_with_tc:
        return gen_prompt + (reasoning_with_tc | (reasoning + content_before_tools + tool_calls)) + end
    return gen_prompt + reasoning + content_before_tools + tool_calls + end


# For transformers' parser: `<DSML invoke name="NAME">` opens a call (the section's opener, V3.2's
# `function_calls` or V4's `tool_calls`, goes with the first), its `<DSML parameter name="K" string="...">V`
# elements read by `xml-inline`, the values cast by the tools' schemas.
_BLOCK = f"<{DSML}(?:function_calls|tool_calls)>"
_CALLS = {"open_pattern": rf'(?:{_BLOCK}\s*)?<{DSML}invoke name="(?P<name>[^"]+)">',
          "close": f"</{DSML}invoke>", "content": "xml-inline",
          "content_args": {"tag_pattern": rf'<{DSML}parameter name="(?P<key>[^"]+)"[^>]*>(?P<value>.*?)</{DSML}parameter>',
                           "value_parser": {"name": "text", "args": {"strip": False}}},
          "repeats": True, "transform": CALL_TRANSFORM}


def _call_tags(fns: Sequence[Function], parallel: bool, *, v4: bool) -> CallTags:
    """For the structural tag and Lark exports: the calls' section, each `<DSML invoke name="NAME">` holding one
    `<DSML parameter name="K" string="true|false">V</DSML parameter>` per argument, in any order: a value the
    schema lets be a string raw up to its closer (`string="true"`), any other JSON under the parameter's schema
    (`string="false"`), as the parser reads them; whitespace between the elements any, as models vary it."""
    block = "tool_calls" if v4 else "function_calls"
    start, end = f"<{DSML}{block}>", f"</{DSML}{block}>"
    param_end, invoke_end = f"</{DSML}parameter>", f"</{DSML}invoke>"
    invokes: list[Piece] = []
    for f in fns:
        args: list[Piece] = []
        for param in parameters(f):
            spelled = f'<{DSML}parameter name="{param.name}" string='
            args.append(by_kind(param, Tag(spelled + '"true">', Text(), param_end),
                                Tag(spelled + '"false">', Json(value_schema(param)), param_end)))
        listed: Piece = Opt(Many(Seq((Space(), Alt(tuple(args)))))) if args else Seq(())
        invokes.append(Seq((Lit(f'{f.name}">'), listed, Space())))
    one = Tag(f'<{DSML}invoke name="', Alt(tuple(invokes)), invoke_end)
    calls = Seq((Space(), one, Opt(Many(Seq((Space(), one)))) if parallel else Seq(()), Space()))
    return CallTags(start, (Tag(start, calls, end),), (invoke_end, end))


V3_2 = FormatSpec(
    "deepseek", partial(_build, v4=False), partial(_prefill, v4=False), laziness=Laziness.TOOLS_NOT_REQUIRED,
    response_format=SchemaRule.OBJECT, triggers=(word(f"<{DSML}function_calls>"),), relaxes=True,
    response_fields=response_fields(_CALLS, thinking=(THINK_START, THINK_END),
                                        markup=(f"</{DSML}function_calls>", f"</{DSML}tool_calls>")),
    preserved_tokens=(DSML, THINK_START, THINK_END), supports_thinking=True, thinking_start_tag=THINK_START,
    thinking_end_tags=(THINK_END, f"<{DSML}function_calls>"), call_tags=partial(_call_tags, v4=False),
    message_delimiters=(("assistant", GEN_PROMPT), ("user", "<｜User｜>")))

# V4 renders tool results in call order and the response format into its system prompt.
V4 = replace(V3_2, build=partial(_build, v4=True), prefill=partial(_prefill, v4=True), messages=sort_tool_results,
             context=_response_format, triggers=(word(f"<{DSML}tool_calls>"),),
             thinking_end_tags=(THINK_END, f"<{DSML}tool_calls>"), call_tags=partial(_call_tags, v4=True))
