"""Phase 1: where a template puts reasoning (C++ `analyze_reasoning`, common/chat-diff-analyzer.cpp)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

from autoparser.analysis import fixtures as fx
from autoparser.analysis._search import MARKER_START, anywhere, parser
from autoparser.analysis.model import ReasoningAnalysis, ReasoningMode
from autoparser.template.diff import (
    DiffRenderer,
    SegmentType,
    TemplateParams,
    prune_whitespace_segments,
    segmentize_markers,
    trim_whitespace,
)

__all__ = ["REASONING_SPELLINGS", "THINK_END", "THINK_START", "analyze_reasoning", "prompt_opened_reasoning",
           "typed_block_reasoning"]

_T = fx.THINKING_CONTENT

_WRAPPED_REST = parser("r.wrapped_rest", lambda p: p.tag("pre", p.marker() + p.space()) + p.literal(_T)
                       + p.tag("post", p.space() + p.marker() + p.space()) + p.rest())
_DELIM_REST = parser("r.delim_rest", lambda p: p.literal(_T) + p.space()
                     + p.optional(p.tag("post", p.marker() + p.space()) + p.rest()))
_WRAPPED_SCOPE = parser("r.wrapped_scope", lambda p: p.tag("pre", p.marker() + p.space()) + p.literal(_T)
                        + p.space() + p.tag("post", p.marker() + p.space()))
_DELIM_SCOPE = parser("r.delim_scope", lambda p: p.literal(_T) + p.space()
                      + p.optional(p.tag("post", p.marker() + p.space())))


def analyze_reasoning(r: DiffRenderer, supports_tool_calls: bool) -> ReasoningAnalysis:
    """Three comparisons, each refining what the one before found: reasoning in history, the effect of
    `enable_thinking` on the generation prompt, and reasoning next to tool calls."""
    found = _compare_reasoning_presence(r, ReasoningAnalysis())
    found = _compare_thinking_enabled(r, found)
    if supports_tool_calls:
        found = _compare_reasoning_scope(r, found)
    return found


def _compare_reasoning_presence(r: DiffRenderer, st: ReasoningAnalysis) -> ReasoningAnalysis:
    params = TemplateParams(messages=(fx.user_msg(), fx.assistant()))
    cmp = r.compare_variants(params, lambda p: dataclasses.replace(
        p, messages=(fx.user_msg(), fx.assistant(reasoning=_T))))
    if cmp is None or _T not in cmp.diff.right:
        return st
    res = anywhere(_WRAPPED_REST, cmp.output_B, starts=MARKER_START)
    if not res.success:
        res = anywhere(_DELIM_REST, cmp.output_B, literal=_T)
    if res.success:
        pre, post = res.get("pre"), res.get("post")
        if pre and post:
            return ReasoningAnalysis(ReasoningMode.TAG_BASED, pre, post)
        if post:
            return dataclasses.replace(st, mode=ReasoningMode.TAG_BASED, end=post)
    return st


def _compare_thinking_enabled(r: DiffRenderer, st: ReasoningAnalysis) -> ReasoningAnalysis:
    params = TemplateParams(messages=(fx.user_msg(),), add_generation_prompt=True, enable_thinking=False)
    cmp = r.compare_variants(params, lambda p: dataclasses.replace(p, enable_thinking=True))
    if cmp is None:
        return st
    diff = cmp.diff
    lt, rt = trim_whitespace(diff.left), trim_whitespace(diff.right)
    if not lt and diff.right:
        if rt and cmp.output_B.endswith(rt) and not st.start:
            st = dataclasses.replace(st, start=diff.right, mode=ReasoningMode.TAG_BASED)
    elif not rt and diff.left:
        if lt and cmp.output_A.endswith(lt) and not st.end:
            seg = prune_whitespace_segments(segmentize_markers(cmp.output_A))
            if len(seg) >= 2 and seg[-1].value == lt and seg[-2].type is SegmentType.MARKER:
                st = dataclasses.replace(st, start=seg[-2].value)
            st = dataclasses.replace(st, end=diff.left, mode=ReasoningMode.TAG_BASED)
    elif lt and rt:
        # Noisy diff (the system prompt changes with the flag): anchor on the tail of one render and look for
        # exactly two markers appended after it in the other.
        for base, extended in ((cmp.output_B, cmp.output_A), (cmp.output_A, cmp.output_B)):
            n = min(len(base), 64)
            anchor = base[len(base) - n:]
            pos = extended.rfind(anchor)
            if pos < 0 or pos + n >= len(extended):
                continue
            extra = trim_whitespace(extended[pos + n:])
            if not extra:
                continue
            seg = prune_whitespace_segments(segmentize_markers(extra))
            if len(seg) == 2 and seg[0].type is SegmentType.MARKER and seg[1].type is SegmentType.MARKER:
                st = ReasoningAnalysis(ReasoningMode.TAG_BASED, st.start or seg[0].value, st.end or seg[1].value)
                break
    if st.mode is ReasoningMode.NONE and not st.start and st.end:
        st = dataclasses.replace(st, mode=ReasoningMode.TAG_BASED)
    return st


def _compare_reasoning_scope(r: DiffRenderer, st: ReasoningAnalysis) -> ReasoningAnalysis:
    call = fx.tool_call(fx.FUN_FIRST, {fx.ARG_FIRST: "VVVV", fx.ARG_SECOND: "XXXX"})
    params = TemplateParams(messages=(fx.user_msg(), fx.assistant(reasoning=_T)), tools=tuple(fx.tools()))
    cmp = r.compare_variants(params, lambda p: dataclasses.replace(
        p, messages=(fx.user_msg(), fx.assistant(None, reasoning=_T, tool_calls=[call]))))
    if cmp is None:
        return st
    if _T in cmp.output_A or _T not in cmp.output_B:
        return st
    res = anywhere(_WRAPPED_SCOPE, cmp.output_B, starts=MARKER_START)
    if res.success:
        return ReasoningAnalysis(ReasoningMode.TOOLS_ONLY, res.get("pre"), res.get("post"))
    res = anywhere(_DELIM_SCOPE, cmp.output_B, literal=_T)
    if res.success:
        return dataclasses.replace(st, mode=ReasoningMode.TOOLS_ONLY, end=res.get("post"))
    return dataclasses.replace(st, mode=ReasoningMode.NONE)


# How models that reason without a template's say so open and close their reasoning.
# The reasoning block most templates write (DeepSeek R1, Qwen3, Kimi, LFM2, Ling, ...): one spelling for the
# analysis and the hand-written formats that write it.
THINK_START, THINK_END = "<think>", "</think>"
REASONING_SPELLINGS = ((THINK_START, THINK_END), ("<thinking>", "</thinking>"), ("<reasoning>", "</reasoning>"),
                       ("[THINK]", "[/THINK]"))

# An opening tag: `<think>`, `<seed:think>`, `<|START_THINKING|>`, `[THINK]`.
_OPENING_TAG = re.compile(r"<([A-Za-z_][\w.:-]*)>|<\|([A-Za-z_][\w.:-]*)\|>|\[([A-Za-z_][\w.:-]*)\]")
_START = re.compile("start", re.IGNORECASE)


def _closing_tags(opener: str) -> list[str]:
    """The tags that would close `opener` by the conventions templates use: the slash form (`</think>`,
    `[/THINK]`) and `start` made `end` (`<start_working_out>` -> `<end_working_out>`, `<|START_THINKING|>` ->
    `<|END_THINKING|>`)."""
    tag = _OPENING_TAG.fullmatch(opener)
    if tag is None:
        return []
    xml, piped, bracketed = tag.groups()
    name = xml or piped or bracketed
    forms = [] if piped else [f"</{name}>" if xml else f"[/{name}]"]
    ended = _START.sub(lambda m: "end" if m[0].islower() else "END" if m[0].isupper() else "End", name, count=1)
    if ended != name:
        forms.append(f"<|{ended}|>" if piped else f"<{ended}>" if xml else f"[{ended}]")
    return forms


def prompt_opened_reasoning(r: DiffRenderer, found: ReasoningAnalysis, source: str) -> ReasoningAnalysis | None:
    """Beyond the C++: a reasoning block the generation prompt opens where the analysis found no end to it.

    Such a template ends the generation prompt with an opening tag that an assistant turn in the history does
    not write (OLMo 3 Think's `<|im_start|>assistant\n<think>`, LongCat's `ASSISTANT:<longcat_think>`), or
    writes one only with `enable_thinking` (the C++ then records it as the reasoning start, with no end), and
    renders no reasoning in the history: the C++ reads the model's `...</think>answer` as content. The end is
    the tag that closes the opener by the template's own convention: the one of `_closing_tags` the template's
    text holds, else the slash form of a known reasoning tag (`<think>`: OLMo 3's template never writes
    `</think>`), and one the history's turns do not write. None where the analysis found the end, or the
    prompt ends otherwise."""
    if found.end:
        return None
    base = TemplateParams(messages=(fx.user_msg(),))
    history = r.apply(base)
    replied = r.apply(dataclasses.replace(base, messages=(fx.user_msg(), fx.assistant())))
    if history is None or replied is None or not replied.startswith(history):
        return None
    turn = replied[len(history):]  # an assistant turn of the history
    opener = found.start
    if not opener:
        prompted = r.apply(dataclasses.replace(base, add_generation_prompt=True))
        if prompted is None or not prompted.startswith(history):
            return None
        prompt = prompted[len(history):]
        segments = prune_whitespace_segments(segmentize_markers(prompt))
        if not segments or segments[-1].type is not SegmentType.MARKER or segments[-1].value in turn:
            return None
        opener = prompt[prompt.rindex(segments[-1].value):]  # (with the whitespace the prompt writes after it)
    tag = trim_whitespace(opener)
    closing = _closing_tags(tag)
    known = any(start.lower() == tag.lower() for start, _ in REASONING_SPELLINGS)
    end = next((c for c in closing if c in source), closing[0] if known and closing else None)
    if end is None or end in turn:
        return None  # (a tag the history's turns close is no reasoning block: a turn's own markup)
    return ReasoningAnalysis(ReasoningMode.TAG_BASED, opener, end)


# The typed content blocks templates write an assistant's reasoning from where they ignore `reasoning_content`
# (each a shape one chat format documents): Mistral's chunks (`{"type": "thinking", "thinking": ...}` beside
# `{"type": "text", ...}`; Ministral 3 Reasoning's and ArmenianGPT's templates), Cohere's (`data` for the text;
# Command's tool-use templates), and Apertus's `{"blocks": [{"type": "thoughts", ...}, {"type": "response", ...}]}`
# (its template and vLLM's tool_chat_template_apertus).
_TYPED_REASONING: tuple[Callable[[str, str], Any], ...] = (
    lambda r, c: [{"type": "thinking", "thinking": r}, {"type": "text", "text": c}],
    lambda r, c: [{"type": "thinking", "data": r}, {"type": "text", "data": c}],
    lambda r, c: {"blocks": [{"type": "thoughts", "text": r}, {"type": "response", "text": c}]},
)


def typed_block_reasoning(r: DiffRenderer, found: ReasoningAnalysis) -> ReasoningAnalysis | None:
    """Beyond the C++: the reasoning block a template writes only from an assistant content's typed blocks.

    The analysis (the C++'s) renders reasoning as `reasoning_content`, which such a template ignores (Apertus
    writes `<|inner_prefix|>...<|inner_suffix|>` from a `thoughts` block, ArmenianGPT `<think>...</think>` from a
    `thinking` chunk): it finds no reasoning, and the model's block is content to llama.cpp. Here the same
    assistant turn is rendered with its reasoning in each typed shape of `_TYPED_REASONING`, the content
    given as the template gets it, and read as the history's reasoning is (`_WRAPPED_REST`: a marker before,
    one after). None where the analysis found a block, or no shape renders one."""
    if found.mode is not ReasoningMode.NONE or found.end:
        return None
    typed = dataclasses.replace(r.caps, supports_string_content=True, supports_typed_content=True)
    renderer = DiffRenderer(r.template, typed)  # (the blocks as given: a string-only template would get them joined)
    for shape in _TYPED_REASONING:
        out = renderer.apply(TemplateParams(messages=(fx.user_msg(), fx.assistant(shape(_T, fx.ASSISTANT_MSG)))))
        if out is None or _T not in out:
            continue
        res = anywhere(_WRAPPED_REST, out, starts=MARKER_START)
        if res.success and res.get("pre") and res.get("post"):
            return ReasoningAnalysis(ReasoningMode.TAG_BASED, res.get("pre"), res.get("post"))
    return None
