"""Phase 2: whether assistant content is wrapped in markers (C++ `analyze_content`)."""

from __future__ import annotations

import dataclasses

from autoparser.analysis import fixtures as fx
from autoparser.analysis._search import MARKER_START, anchored, anywhere, parser
from autoparser.analysis.model import ContentAnalysis, ContentMode, ReasoningAnalysis, ReasoningMode
from autoparser.template.diff import DiffRenderer, TemplateParams, trim_whitespace

__all__ = ["analyze_content"]

_A = fx.ASSISTANT_MSG

_WRAPPED = parser("c.wrapped", lambda p: p.tag("pre", p.marker() + p.space()) + p.literal(_A) + p.space()
                  + p.tag("post", p.marker() + p.space()) + p.rest())


def analyze_content(r: DiffRenderer, reasoning: ReasoningAnalysis) -> ContentAnalysis:
    params = TemplateParams(messages=(fx.user_msg(), fx.assistant()), tools=tuple(fx.tools()))
    with_tools = r.compare_variants(params, lambda p: dataclasses.replace(p, messages=(
        fx.user_msg(), fx.assistant_calls(fx.tool_call("test_func", {"arg1": "value1"})))))
    with_reasoning = r.compare_variants(params, lambda p: dataclasses.replace(p, messages=(
        fx.user_msg(), fx.assistant("", reasoning=fx.THINKING_CONTENT))))
    if with_tools is None or with_reasoning is None:
        return ContentAnalysis()
    diff_tools, diff_reasoning = with_tools.diff, with_reasoning.diff

    if trim_whitespace(diff_tools.left) == _A:
        left = diff_reasoning.left
        plain = parser("c.plain:" + left, lambda p: p.space() + p.literal(left) + p.space()
                       + p.optional(p.marker()) + p.space() + p.end())
        if anchored(plain, left).success:
            return ContentAnalysis(ContentMode.PLAIN)
        if reasoning.mode is not ReasoningMode.NONE and reasoning.end:
            end = reasoning.end
            post = parser("c.post:" + end, lambda p: p.literal(end) + p.space() + p.literal(_A))
            if anywhere(post, left, literal=end).success:
                return ContentAnalysis(ContentMode.PLAIN)

    rdiff = diff_reasoning.left
    if reasoning.end and reasoning.end in rdiff:
        rdiff = rdiff[rdiff.find(reasoning.end) + len(reasoning.end):]
    pure = rdiff if len(rdiff) > len(diff_tools.left) else diff_tools.left
    res = anywhere(_WRAPPED, pure, starts=MARKER_START)
    start, end = (res.get("pre"), res.get("post")) if res.success else ("", "")
    if start or end:
        return ContentAnalysis(ContentMode.ALWAYS_WRAPPED, start, end)
    return ContentAnalysis(ContentMode.PLAIN)
