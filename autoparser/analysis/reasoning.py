"""Phase 1: where a template puts reasoning (C++ `analyze_reasoning`)."""

from __future__ import annotations

import dataclasses

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

__all__ = ["analyze_reasoning"]

_T = fx.THINKING_CONTENT

_WRAPPED_REST = parser("r.wrapped_rest", lambda p: p.tag("pre", p.marker() + p.space()) + p.literal(_T)
                       + p.tag("post", p.space() + p.marker() + p.space()) + p.rest())
_DELIM_REST = parser("r.delim_rest", lambda p: p.literal(_T) + p.space()
                     + p.optional(p.tag("post", p.marker() + p.space()) + p.rest()))
_WRAPPED_SCOPE = parser("r.wrapped_scope", lambda p: p.tag("pre", p.marker() + p.space()) + p.literal(_T)
                        + p.space() + p.tag("post", p.marker() + p.space()))
_DELIM_SCOPE = parser("r.delim_scope", lambda p: p.literal(_T) + p.space()
                      + p.optional(p.tag("post", p.marker() + p.space())))


@dataclasses.dataclass
class _State:
    mode: ReasoningMode = ReasoningMode.NONE
    start: str = ""
    end: str = ""


def analyze_reasoning(r: DiffRenderer, supports_tool_calls: bool) -> ReasoningAnalysis:
    st = _State()
    _compare_reasoning_presence(r, st)
    _compare_thinking_enabled(r, st)
    if supports_tool_calls:
        _compare_reasoning_scope(r, st)
    return ReasoningAnalysis(st.mode, st.start, st.end)


def _compare_reasoning_presence(r: DiffRenderer, st: _State) -> None:
    params = TemplateParams(messages=(fx.user_msg(), fx.assistant()))
    cmp = r.compare_variants(params, lambda p: dataclasses.replace(
        p, messages=(fx.user_msg(), fx.assistant(reasoning=_T))))
    if cmp is None or _T not in cmp.diff.right:
        return
    res = anywhere(_WRAPPED_REST, cmp.output_B, starts=MARKER_START)
    if not res.success:
        res = anywhere(_DELIM_REST, cmp.output_B, literal=_T)
    if res.success:
        pre, post = res.get("pre"), res.get("post")
        if pre and post:
            st.mode, st.start, st.end = ReasoningMode.TAG_BASED, pre, post
        elif post:
            st.mode, st.end = ReasoningMode.TAG_BASED, post


def _compare_thinking_enabled(r: DiffRenderer, st: _State) -> None:
    params = TemplateParams(messages=(fx.user_msg(),), add_generation_prompt=True, enable_thinking=False)
    cmp = r.compare_variants(params, lambda p: dataclasses.replace(p, enable_thinking=True))
    if cmp is None:
        return
    diff = cmp.diff
    lt, rt = trim_whitespace(diff.left), trim_whitespace(diff.right)
    if not lt and diff.right:
        if rt and cmp.output_B.endswith(rt) and not st.start:
            st.start, st.mode = diff.right, ReasoningMode.TAG_BASED
    elif not rt and diff.left:
        if lt and cmp.output_A.endswith(lt) and not st.end:
            seg = prune_whitespace_segments(segmentize_markers(cmp.output_A))
            if len(seg) >= 2 and seg[-1].value == lt and seg[-2].type is SegmentType.MARKER:
                st.start = seg[-2].value
            st.end, st.mode = diff.left, ReasoningMode.TAG_BASED
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
                if not st.start:
                    st.start = seg[0].value
                if not st.end:
                    st.end = seg[1].value
                st.mode = ReasoningMode.TAG_BASED
                break
    if st.mode is ReasoningMode.NONE and not st.start and st.end:
        st.mode = ReasoningMode.TAG_BASED


def _compare_reasoning_scope(r: DiffRenderer, st: _State) -> None:
    call = fx.tool_call(fx.FUN_FIRST, {fx.ARG_FIRST: "VVVV", fx.ARG_SECOND: "XXXX"})
    params = TemplateParams(messages=(fx.user_msg(), fx.assistant(reasoning=_T)), tools=tuple(fx.tools()))
    cmp = r.compare_variants(params, lambda p: dataclasses.replace(
        p, messages=(fx.user_msg(), fx.assistant(None, reasoning=_T, tool_calls=[call]))))
    if cmp is None:
        return
    if _T in cmp.output_A or _T not in cmp.output_B:
        return
    st.mode = ReasoningMode.TOOLS_ONLY
    res = anywhere(_WRAPPED_SCOPE, cmp.output_B, starts=MARKER_START)
    if res.success:
        st.start, st.end = res.get("pre"), res.get("post")
        return
    res = anywhere(_DELIM_SCOPE, cmp.output_B, literal=_T)
    if res.success:
        st.end = res.get("post")
    else:
        st.mode = ReasoningMode.NONE
