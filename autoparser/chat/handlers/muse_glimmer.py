"""Muse Glimmer (`common_chat_params_init_muse_glimmer`, parsers/muse-glimmer.cpp).

An assistant turn is one or more messages `<|start|>assistant to=RECIPIENT<|message|>BODY END`, END being
`<|eom|>` (more follows) or `<|eot|>` (turn over): chain of thought goes `to=self`, the answer `to=user`, and a
tool call `to=TOOL` with an ATEM XML body:

    <atem:function_calls><atem:invoke name="NAME"><atem:parameter name="ARG">value</atem:parameter>...
    </atem:invoke></atem:function_calls>

The generation prompt is just `<|start|>assistant`; the model writes its own recipient. Why a handler: one
output holds several messages, each re-opened with the role marker, and calls are told apart by recipient.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from autoparser.chat.builder import ChatBuilder
from autoparser.chat.spec import Build, FormatSpec, Prefill, SchemaRule, pattern
from autoparser.chat.tools import Function, functions, parameters
from autoparser.peg.builder import P

PARAM_END = "</atem:parameter>"


def detect(source: str) -> FormatSpec | None:
    return SPEC if "<atem:function_calls>" in source and "<|eom|>" in source else None


def _build(b: Build) -> P:
    p = b.p
    # (relaxed: the header's role left out, `<|start|>to=user<|message|>`, and the prompt's `<|start|>` written
    # again, as SGLang's Muse Glimmer tests write them; each where the rest of a header follows, so that a header
    # the end of the output cuts off, `<|start|>to`, opens nothing and stays text)
    def header() -> P:  # (the rest of a header: a recipient, or none, then `<|message|>`)
        return p.optional(p.header_marker(" to=") + p.until("<|message|>")) + p.literal("<|message|>")

    start = p.rule("start", p.opener_again(p.labelled_marker("<|start|>", "assistant", header), "<|start|>", header))
    if not b.extract_reasoning and not b.constrained:
        return start + p.content(p.rest())

    if b.extract_reasoning:
        # (relaxed: a chain of thought whose `<|eom|>` is left out ends where the next message begins)
        p.rule("analysis", p.reasoning_between(
            lambda: p.header_marker(" to=self<|message|>") + p.reasoning(p.until("<|eom|>")) + p.literal("<|eom|>"),
            " to=self<|message|>", "<|eom|>", ["<|start|>"] if b.tool_calls else [],
            opener=lambda: p.header_marker(" to=self<|message|>")))
    else:
        p.rule("analysis", p.header_marker(" to=self<|message|>") + p.content(p.until("<|eom|>"))
               + p.literal("<|eom|>"))
    analysis = p.ref("analysis")

    recipient = p.optional(p.header_marker(" to=user", "<|message|>"))
    final_msg = p.rule("final", p.cpp_sum(lambda: recipient, lambda: p.literal("<|message|>"),
                                        lambda: p.content(p.until_one_of(["<|eot|>", "<|eom|>"]))))

    if b.response_format:
        response_json = p.content(p.schema(p.json(), "response-format-schema", b.inputs.json_schema))
        rf = p.rule("response-format", recipient + p.literal("<|message|>")
                    + ((p.literal("```json") + p.space() + response_json + p.space() + p.literal("```"))
                       | response_json))
        return p.zero_or_more(start + analysis) + start + rf

    if b.tool_calls:
        # Operands are created in the C++ evaluation order (see cpp_sum) so that automaton rule ids match.
        string_value = p.ac(p.cpp_sum(lambda: p.tool_arg_string_value(p.until(PARAM_END)),
                                    lambda: p.tool_arg_close(p.value_closer(PARAM_END))), PARAM_END)

        def args_of(f: Function) -> P:  # (relaxed: also an argument the tool does not declare, kept)
            opener = '<atem:parameter name="'
            return p.args_any_order([p.quoted_name_arg(opener, param, string_value, PARAM_END,
                                                       f"tool-{f.name}-arg-{param.name}-schema", f.schema)
                                     for param in parameters(f)]
                                    + p.undeclared_attribute_arg(opener, string_value, f.schema))

        @cache  # (built once, by the relaxed parser only: `more_calls_before`)
        def invoke() -> P:
            return p.rule("invoke", p.choice([_invoke(p, f.name, args_of(f)) for f in functions(b.inputs.tools)]))

        tool_choice = p.choice()
        for f in functions(b.inputs.tools):
            tool_choice |= p.rule(f"tool-{f.name}", _tool(p, f.name, args_of(f), invoke))

        if b.parallel:
            # (relaxed, space_then: whitespace before the `<|eom|>` that ends a call)
            tool_calls = p.trigger_rule("tool-call", tool_choice
                                        + p.zero_or_more(p.space_then(p.literal("<|eom|>")) + start + tool_choice))
        else:
            tool_calls = p.trigger_rule("tool-call", tool_choice)

        if b.required:
            return p.zero_or_more(start + analysis) + start + tool_calls
        trailing_calls = p.optional(p.literal("<|eom|>") + start + tool_calls)
        # (relaxed: the final message written after the calls)
        calls_then = p.message_after_calls(tool_calls, lambda: p.optional(p.literal("<|eom|>")) + start + final_msg)
        return p.zero_or_more(start + analysis) + start + (calls_then | (final_msg + trailing_calls))

    return p.zero_or_more(start + analysis) + start + final_msg


def _tool(p: ChatBuilder, name: str, args: P, invoke: Callable[[], P]) -> P:
    """` to=RECIPIENT<|message|><atem:function_calls><atem:invoke name="NAME">ARGS</atem:invoke>...` (relaxed:
    further `invoke()` calls in the block, `more_calls_before`)."""
    def head(*recipient: Callable[[], P]) -> P:
        return p.tool_open(p.cpp_sum(
            *recipient, lambda: p.joined_markers("<|message|><atem:function_calls>"), p.space,
            *p.name_attribute('<atem:invoke name="', lambda: p.tool_name(p.literal(name))), p.space))

    # (relaxed: a message header without its ` to=RECIPIENT`, the call told by its body)
    tool_open = p.written_otherwise(lambda: head(lambda: p.header_marker(" to="), lambda: p.until("<|message|>")), head,
                                    "<atem:function_calls>", "missing_recipient")
    return p.tool(tool_open << p.tool_args(args) << p.tool_close(p.cpp_sum(
        lambda: p.literal("</atem:invoke>"),
        *p.more_calls_before(invoke, p.space, lambda: p.literal("</atem:function_calls>")))))


def _invoke(p: ChatBuilder, name: str, args: P) -> P:
    """A call inside a block another call opened: `<atem:invoke name="NAME">ARGS</atem:invoke>`."""
    return p.tool(p.tool_open(p.cpp_sum(*p.name_attribute('<atem:invoke name="', lambda: p.tool_name(p.literal(name))),
                                        p.space))
                  << p.tool_args(args) << p.tool_close(p.literal("</atem:invoke>")))


SPEC = FormatSpec(
    "muse_glimmer", _build,
    Prefill("<|start|>assistant", " to=self<|message|>", "<|eom|><|start|>assistant to=user<|message|>"),
    generation_prompt="<|start|>assistant", response_format=SchemaRule.OBJECT,
    # A message to any recipient but self or user is a tool call.
    triggers=(pattern(r"(?:^|<\|start\|>assistant)( to=(?!self<\|message\|>)(?!user<\|message\|>)[^<]*?<\|message\|>)"),),
    preserved_tokens=("<|start|>", "<|message|>", "<|eom|>", "<|eot|>",
                      # the ATEM markup of tool-call messages
                      "<atem:function_calls>", "<atem:invoke", "<atem:parameter", PARAM_END,
                      "</atem:invoke>", "</atem:function_calls>"),
    supports_thinking=True, relaxes=True,
    message_delimiters=(("assistant", "<|start|>assistant"), ("user", "<|start|>user"),
                        ("system", "<|start|>system"), ("tool", "<|start|>tool")))
