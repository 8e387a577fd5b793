"""GPT-OSS (OpenAI Harmony): channel-based messages (`common_chat_params_init_gpt_oss`, parsers/gpt-oss.cpp).

Every assistant turn is `<|start|>assistant` + a channel header + `<|message|>` + body. `analysis` carries the
reasoning, `final` the answer, `commentary` preambles; a tool call names its recipient `to=functions.NAME`
either in the role header or in the channel header. Why a handler: one output holds several assistant turns,
each re-opened with the role marker, which the analyzer's one-turn model cannot describe.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from autoparser.chat.constraint import Alt, CallTags, Json, Lit, Opt, Pattern, Seq, Space, Tag, arguments_schema
from autoparser.chat.inputs import GenerationInputs
from autoparser.chat.spec import Build, FormatSpec, Prefill, Rendered, SchemaRule, pattern
from autoparser.chat.tools import Function, functions
from autoparser.peg.builder import P

RETURN_TOKEN = "<|return|>"
END_TOKEN = "<|end|>"


def detect(source: str) -> FormatSpec | None:
    return SPEC if "<|channel|>" in source else None


def _thinking_field(messages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The template reads reasoning from `thinking`; with tool calls the content must go (it would render twice)."""
    out: list[Mapping[str, Any]] = []
    for m in messages:
        msg = dict(m)
        if isinstance(msg.get("reasoning_content"), str):
            msg["thinking"] = msg["reasoning_content"]
            calls = msg.get("tool_calls")
            if isinstance(calls, list) and calls:
                msg.pop("content", None)
        out.append(msg)
    return out


def _closed_last_turn(rendered: Rendered, inputs: GenerationInputs) -> Rendered:
    """llama.cpp issue 15417: a rendered history ends with <|return|>, but at inference the model's last turn
    must read as closed with <|end|> so that a new turn can follow."""
    pos = rendered.prompt.rfind(RETURN_TOKEN)
    if inputs.add_generation_prompt or pos < 0:
        return rendered
    return replace(rendered, prompt=rendered.prompt[:pos] + END_TOKEN + rendered.prompt[pos + len(RETURN_TOKEN):])


class Harmony:
    """gpt-oss's parser (parsers/gpt-oss.cpp). A dialect of the format is a subclass that spells some pieces
    otherwise (`llm_jp_harmony`); the pieces are made in the C++'s order, so the grammar's rules are too."""

    def __init__(self, b: Build) -> None:
        self.b = b
        self.p = b.p

    def start(self) -> P:
        return self.p.literal("<|start|>assistant")

    def header(self, channel: str, *, message: bool = True) -> P:
        """`<|channel|>NAME`, and `<|message|>` after it (relaxed: one the output's end cuts off is text)."""
        return self.p.header_marker("<|channel|>" + channel + ("<|message|>" if message else ""))

    def channel(self) -> P:
        """A header whose channel a call or a preamble may take."""
        return self.p.literal("<|channel|>") + (self.p.literal("commentary") | self.p.literal("analysis"))

    def message(self) -> P:
        return self.p.literal("<|message|>")

    def constraint(self) -> P:
        """` <|constrain|>json` after a header: the type's token is optional."""
        p = self.p
        return p.optional(p.space() + p.optional(p.literal("<|constrain|>")) + p.chars("[A-Za-z0-9_-]", 1, -1))

    def after_stray(self, header: P) -> P:
        """A header the model may write after a stray `<|channel|>commentary[ to=assistant]` (gpt-oss-20b
        sometimes opens a turn with one before the real channel)."""
        p = self.p
        return p.optional(p.literal("<|channel|>commentary") + p.optional(p.literal(" to=assistant"))) + header

    def unsolicited(self, channel: P, content: P, end: P) -> P | None:
        """Calls the request did not declare (built-in tools such as python or container.exec), consumed
        whole when no tool may be called."""
        p = self.p
        return p.rule("unsolicited", p.atomic(p.optional(channel) + p.literal(" to=") + content + end))

    def calls(self, one: P, start: P, end: P) -> P:
        """What the trigger rule takes: gpt-oss's parser reads one call, in the output's last turn. Relaxed: also
        further messages to a function after it (`...<|call|><|start|>assistant<|channel|>commentary to=...`),
        where the model writes several calls (the template renders one per assistant message)."""
        return self.further_calls(one, start, end)

    def further_calls(self, one: P, start: P, end: P) -> P:
        """`one` call, and (relaxed) the calls of further messages after it."""
        p = self.p
        # (a further message begins where a message's end and the next one's start follow: an output's last
        # `<|call|>`, the stop token, begins none)
        return p.call_sections(one, lambda: (p.literal(CALL_END) | end) + start + one,
                               [CALL_END + "<|start|>", "<|end|><|start|>"])

    def build(self) -> P:
        b, p = self.b, self.p
        start = p.rule("start", self.start())
        end = p.rule("end", p.literal("<|end|>"))
        content = p.rule("message-content", p.until("<|end|>"))
        channel = self.channel()
        constraint = self.constraint()

        start_analysis = self.after_stray(self.header("analysis"))
        if b.extract_reasoning:
            p.rule("analysis", start_analysis + p.reasoning(content) + end)
        else:
            p.rule("analysis", p.content(start_analysis + content + end))

        analysis = p.ref("analysis")
        preamble = p.rule("preamble", self.header("commentary") + p.content(content) + end)
        final_msg = p.rule("final", self.after_stray(self.header("final")) + p.content(content))
        unsolicited = self.unsolicited(channel, content, end)
        any_ = p.rule("any", preamble | analysis)

        if b.response_format:
            rf = p.rule("response-format", self.header("final", message=False) + constraint + self.message()
                        + p.content(p.schema(p.json(), "response-format-schema", b.inputs.json_schema)))
            return p.zero_or_more(start + analysis) + start + rf

        if b.tool_calls:
            tool_choice = p.choice()
            for f in functions(b.inputs.tools):
                func_name = p.literal(" to=functions.") + p.tool_name(p.literal(f.name))
                args = p.tool_args(p.schema(p.arguments_value(), f"tool-{f.name}-schema", f.schema))
                # <|start|>assistant to=functions.NAME<|channel|>commentary[ <|constrain|>json]<|message|>ARGS
                tool_in_role = p.tool(p.tool_open(func_name + channel + constraint + self.message()) + args)
                # <|start|>assistant<|channel|>commentary to=functions.NAME[ <|constrain|>json]<|message|>ARGS
                tool_in_channel = p.tool(p.tool_open(channel + func_name + constraint + self.message()) + args)
                tool_choice |= p.rule(f"tool-{f.name}", tool_in_role | tool_in_channel)
            tool_call = p.trigger_rule("tool-call", self.calls(tool_choice, start, end))
            # (relaxed: a call's header is where the reading resumes after a message it cannot read, `<|channel|>
            # commentary 2?...<|end|>`; the triggers are patterns, which name no text to resume at)
            p.calls_begin_at(["<|channel|>commentary to=", "<|channel|>analysis to=", " to=functions."])
            if b.required:
                return p.zero_or_more(start + any_) + start + tool_call
            return p.zero_or_more(start + any_) + start + (tool_call | final_msg)

        last = final_msg if unsolicited is None else final_msg | unsolicited
        return p.zero_or_more(start + any_) + start + last


def _build(b: Build) -> P:
    return Harmony(b).build()


CALL_END = "<|call|>"


def _call_tags(fns: Sequence[Function], parallel: bool) -> CallTags:
    """For the structural tag and Lark exports: a call is a message to ` to=functions.NAME`, the recipient after
    the role (`<|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>ARGS<|call|>`) or after
    the channel (`<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>ARGS`): either way the
    recipient is the trigger, and the header's rest, the arguments' JSON and the message's end follow it. (A call
    that other messages follow ends with `<|end|>`, the turn's last one with `<|call|>`.)"""
    constraint = Opt(Seq((Space(), Opt(Lit("<|constrain|>")), Space(), Pattern("[A-Za-z0-9_-]+"))))
    calls = Alt(tuple(Seq((Lit(f.name), Opt(Lit("<|channel|>commentary")), constraint, Lit("<|message|>"), Space(),
                           Json(arguments_schema(f)),
                           Space(), Alt((Lit(CALL_END), Lit(END_TOKEN))))) for f in fns))
    return CallTags(" to=functions.", (Tag(" to=functions.", calls, ""),), (CALL_END,),
                    lead=("<|start|>assistant", "<|start|>assistant<|channel|>commentary"))


SPEC = FormatSpec(
    "gpt_oss", _build,
    Prefill("<|start|>assistant", "<|channel|>analysis<|message|>",
            "<|end|><|start|>assistant<|channel|>final<|message|>"),
    response_format=SchemaRule.OBJECT, messages=_thinking_field, fix_prompt=_closed_last_turn,
    # Where a tool call begins: a recipient after the role (` to=`) or after the channel name.
    triggers=(pattern(r"^\s+to$"), pattern(r"^<\|channel\|>(?:commentary|analysis)\s+to=functions$"),
              pattern(r"<\|start\|>assistant(\s+to)"),
              pattern(r"<\|start\|>assistant(<\|channel\|>(?:commentary|analysis)\s+to)")),
    preserved_tokens=("<|channel|>", "<|constrain|>", "<|message|>", "<|start|>", "<|end|>"),
    supports_thinking=True, thinking_start_tag="<|channel|>analysis<|message|>", thinking_end_tags=("<|end|>",),
    call_tags=_call_tags, relaxes=True,
    message_delimiters=(("assistant", "<|start|>assistant"), ("user", "<|start|>user"),
                        ("system", "<|start|>developer"), ("system", "<|start|>system"),
                        ("tool", "<|start|>functions")))
