"""LLM-jp-4.1: gpt-oss's Harmony format in a dialect of its own (`common_chat_params_init_llm_jp_harmony`,
parsers/llm-jp-harmony.cpp, llama.cpp b11434).

Two differences from gpt-oss: the tokenizer writes a space after every special token (`<|channel|> analysis
<|message|> ...`), and parallel calls are consecutive assistant turns, all but the last closed by `<|end|>`.
Why a handler: the spaces come from the tokenizer, not the template, so nothing the template renders shows them;
and llama.cpp selects the dialect by a comment it added to its copy of the template
(`{#- chat_format=llm-jp-harmony-v1 -#}`), not by the template's markup, which is gpt-oss's.
"""

from __future__ import annotations

from dataclasses import replace

from autoparser.chat.handlers import gpt_oss
from autoparser.chat.spec import Build, FormatSpec, pattern
from autoparser.peg.builder import P

FORMAT_COMMENT = "chat_format=llm-jp-harmony-v1"


def detect(source: str) -> FormatSpec | None:
    return SPEC if FORMAT_COMMENT in source else None


class LlmJpHarmony(gpt_oss.Harmony):
    """The spaces after special tokens: any number (GBNF's `space` allows one only), except after
    `<|message|>`, where one space is the tokenizer's and a second is the model's own text. The three pieces
    are made first and shared, as in the C++ (the grammar's generated rule names count the nodes made)."""

    def __init__(self, b: Build) -> None:
        super().__init__(b)
        p = self.p
        self.spaces = p.chars("[ ]", 0, -1)
        self.channel_tag = p.literal("<|channel|>") + self.spaces
        self.message_tag = p.literal("<|message|>") + p.optional(p.literal(" "))

    def start(self) -> P:
        return self.p.literal("<|start|>") + self.spaces + self.p.literal("assistant")

    def header(self, channel: str, *, message: bool = True) -> P:
        head = self.channel_tag + self.p.literal(channel)
        return head + self.message_tag if message else head

    def channel(self) -> P:
        return self.channel_tag + (self.p.literal("commentary") | self.p.literal("analysis"))

    def message(self) -> P:
        return self.message_tag

    def constraint(self) -> P:
        p = self.p
        return p.optional(p.space() + p.optional(p.literal("<|constrain|>") + self.spaces)
                          + p.chars("[A-Za-z0-9_-]", 1, -1))

    def after_stray(self, header: P) -> P:
        return header  # llama.cpp's dialect has no stray commentary header

    def unsolicited(self, channel: P, content: P, end: P) -> P | None:
        return None  # nor a rule for undeclared tools: the last turn is the final channel

    def calls(self, one: P, start: P, end: P) -> P:
        # parallel calls are turns split by <|end|>, inside the trigger rule so the lazy grammar covers them all
        return one + self.p.zero_or_more(end + start + one) if self.b.parallel else self.further_calls(one, start, end)


def _build(b: Build) -> P:
    return LlmJpHarmony(b).build()


SPEC = replace(
    gpt_oss.SPEC, name="llm_jp_harmony", build=_build,
    # gpt-oss's triggers with the tokenizer's spaces allowed after `<|channel|>` and `<|start|>`
    triggers=(pattern(r"^\s+to$"), pattern(r"^<\|channel\|>\s*(?:commentary|analysis)\s+to=functions$"),
              pattern(r"<\|start\|>\s*assistant(\s+to)"),
              pattern(r"<\|start\|>\s*assistant(<\|channel\|>\s*(?:commentary|analysis)\s+to)")))
