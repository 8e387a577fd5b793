"""Segment-aware string diffing used by the differential template analyzer (C++ chat-auto-parser-helpers).

Two renders of a template that differ in one input are split into a common prefix, a common suffix and the
two differing middles. The split is aligned on `<...>` / `[...]` markers so that a prefix never ends halfway
through a tag, which is what lets the analyzer read markers straight out of the middles.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from autoparser.peg.nodes import C_SPACE
from autoparser.template.caps import TemplateCaps, normalize_messages
from autoparser.template.cpp import CppTemplate
from autoparser.template.render import common_prefix_len, render_context
from autoparser.template.sandbox import run_template

# Templates that print the date must render identically in both variants of a comparison.
_FIXED_NOW = datetime(2026, 1, 1, 12, 0, 0)

__all__ = [
    "CompareResult",
    "DiffRenderer",
    "DiffSplit",
    "Segment",
    "SegmentType",
    "TemplateParams",
    "after_common_suffix",
    "calculate_diff_split",
    "common_suffix_len",
    "compare_variants",
    "prune_whitespace_segments",
    "segmentize_markers",
    "trim_leading_whitespace",
    "trim_trailing_newlines",
    "trim_trailing_whitespace",
    "trim_whitespace",
    "until_common_prefix",
    "with_string_arguments",
]


# The C++ trims with `isspace` in the "C" locale (C_SPACE), never Unicode spaces as str.strip() would.
def trim_whitespace(s: str) -> str:
    return s.strip(C_SPACE)


def trim_leading_whitespace(s: str) -> str:
    return s.lstrip(C_SPACE)


def trim_trailing_whitespace(s: str) -> str:
    return s.rstrip(C_SPACE)


def trim_trailing_newlines(s: str) -> str:
    return s.rstrip("\n")


class SegmentType(enum.Enum):
    TEXT = "TEXT"
    MARKER = "MARKER"


@dataclass(frozen=True)
class Segment:
    type: SegmentType
    value: str


@dataclass(frozen=True)
class DiffSplit:
    prefix: str = ""
    suffix: str = ""
    left: str = ""
    right: str = ""


_CLOSER = {"<": ">", "[": "]"}


def segmentize_markers(text: str) -> list[Segment]:
    """Split text into MARKER segments (`<...>`, `[...]`, no nesting) and the TEXT between them."""
    out: list[Segment] = []
    pos = 0
    n = len(text)
    while pos < n:
        # Next opener of either kind, found with str.find (the scan is hot: every diff segments two renders).
        lt = text.find("<", pos)
        sq = text.find("[", pos)
        if lt < 0 and sq < 0:
            break
        start = lt if sq < 0 or (0 <= lt < sq) else sq
        close = text.find(_CLOSER[text[start]], start + 1)
        if close < 0:
            break
        if start > pos:
            out.append(Segment(SegmentType.TEXT, text[pos:start]))
        out.append(Segment(SegmentType.MARKER, text[start:close + 1]))
        pos = close + 1
    if pos < n:
        # Trailing text, including an unterminated marker (the C++ flushes it as TEXT together with any text
        # before the opener only when no border was set; it sets the border at the opener, so split there).
        out.extend(_tail_segments(text, pos))
    return out


def _tail_segments(text: str, pos: int) -> list[Segment]:
    lt = text.find("<", pos)
    sq = text.find("[", pos)
    starts = [i for i in (lt, sq) if i >= 0]
    if not starts:
        return [Segment(SegmentType.TEXT, text[pos:])]
    start = min(starts)
    segs = []
    if start > pos:
        segs.append(Segment(SegmentType.TEXT, text[pos:start]))
    segs.append(Segment(SegmentType.TEXT, text[start:]))
    return segs


def prune_whitespace_segments(segments: list[Segment]) -> list[Segment]:
    return [s for s in segments if trim_whitespace(s.value)]


def common_suffix_len(a: str, b: str) -> int:
    n = min(len(a), len(b))
    if n == 0:
        return 0
    if a[len(a) - n:] == b[len(b) - n:]:
        return n
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[len(a) - mid:] == b[len(b) - mid:]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _place_lone_segment(lone: Segment, other: list[Segment], start: int, end: int, prefix_parts: list[str],
                        suffix_parts: list[str]) -> tuple[int, int, bool]:
    """One side has a single segment left and the other several (`other[start:end + 1]`): the lone one is
    common when it equals the other's last segment (suffix, tried first) or else its first (prefix). Either
    side may be the lone one, so the rule is written once for both. Returns the other side's new bounds and
    whether the lone segment was placed."""
    if lone == other[end]:
        suffix_parts.append(lone.value)
        return start, end - 1, True
    if lone == other[start]:
        prefix_parts.append(lone.value)
        return start + 1, end, True
    return start, end, False


def calculate_diff_split(left: str, right: str) -> DiffSplit:
    """Prefix/suffix/left/right split of two strings, aligned on marker segments (`calculate_diff_split`,
    chat-auto-parser-helpers.cpp): whole markers are matched from both ends first, then the remaining text."""
    lseg = segmentize_markers(left)
    rseg = segmentize_markers(right)
    if not lseg:
        return DiffSplit(right=right)
    if not rseg:
        return DiffSplit(left=left)

    ls, le, rs, re_ = 0, len(lseg) - 1, 0, len(rseg) - 1
    prefix_parts: list[str] = []
    suffix_parts: list[str] = []  # collected back to front
    lfc = rfc = False

    while ls != le and rs != re_:
        advanced = False
        if lseg[ls] == rseg[rs]:
            prefix_parts.append(lseg[ls].value)
            ls += 1
            rs += 1
            advanced = True
        if lseg[le] == rseg[re_]:
            suffix_parts.append(lseg[le].value)
            if ls != le:
                le -= 1
            else:
                lfc = True
            if rs != re_:
                re_ -= 1
            else:
                rfc = True
            advanced = True
        if not advanced:
            break

    if ls == le and rs != re_:
        rs, re_, placed = _place_lone_segment(lseg[ls], rseg, rs, re_, prefix_parts, suffix_parts)
        lfc = lfc or placed
    elif rs == re_ and ls != le:
        ls, le, placed = _place_lone_segment(rseg[rs], lseg, ls, le, prefix_parts, suffix_parts)
        rfc = rfc or placed
    elif ls == le and rs == re_ and lseg[ls] == rseg[rs] and lseg[ls].type is SegmentType.MARKER:
        prefix_parts.append(rseg[rs].value)
        lfc = rfc = True

    text_suffix_ok = lseg[le].type is SegmentType.TEXT and rseg[re_].type is SegmentType.TEXT
    text_prefix_ok = lseg[ls].type is SegmentType.TEXT and rseg[rs].type is SegmentType.TEXT

    rem_l = "".join(s.value for s in lseg[ls:le if lfc else le + 1])
    rem_r = "".join(s.value for s in rseg[rs:re_ if rfc else re_ + 1])

    s = common_suffix_len(rem_l, rem_r) if text_suffix_ok else 0
    p = common_prefix_len(rem_l[:len(rem_l) - s], rem_r[:len(rem_r) - s]) if text_prefix_ok else 0

    prefix = "".join(prefix_parts) + rem_l[:p]
    suffix = rem_l[len(rem_l) - s:] + "".join(reversed(suffix_parts))
    out_l = rem_l[p:len(rem_l) - s]
    out_r = rem_r[p:len(rem_r) - s]

    if not out_l and not out_r:
        # Nothing differs: represent the whole input as prefix.
        prefix, suffix = left, ""
    if not out_l and out_r and right.startswith(left):
        # B = A + extra: the simultaneous matching may have rotated a shared trailing segment into the suffix.
        prefix, suffix, out_r = left, "", right[len(left):]
    return DiffSplit(prefix=prefix, suffix=suffix, left=out_l, right=out_r)


def until_common_prefix(full: str, left: str, right: str) -> str:
    """`full` up to the first occurrence of the common prefix of left and right ("" if none / not found)."""
    n = common_prefix_len(left, right)
    if n == 0:
        return ""
    pos = full.find(left[:n])
    return "" if pos < 0 else full[:pos]


def after_common_suffix(full: str, left: str, right: str) -> str:
    """`full` after the last occurrence of the common suffix of left and right ("" if none / not found)."""
    n = common_suffix_len(left, right)
    if n == 0:
        return ""
    common = left[len(left) - n:]
    pos = full.rfind(common)
    return "" if pos < 0 else full[pos + n:]


# --- differential rendering ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class TemplateParams:
    """The inputs of one analyzer render (C++ `template_params`)."""

    messages: tuple[Any, ...] = ()
    tools: tuple[Any, ...] | None = None
    add_generation_prompt: bool = False
    enable_thinking: bool = True
    extra_context: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class CompareResult:
    diff: DiffSplit
    output_A: str
    output_B: str


class DiffRenderer:
    """Renders a template the way the C++ analyzer does, caching outputs (the phases re-render the same inputs).

    A failed render is remembered as None: the C++ turns every exception into its error sentinel.
    """

    def __init__(self, template: CppTemplate, caps: TemplateCaps, *, string_arguments: bool = False) -> None:
        self.template = template
        self.caps = caps
        # Tool-call arguments given as JSON strings, as OpenAI-style requests give them (the C++ analyzer gives
        # objects; a template that prints its arguments as they come renders those as Python dicts).
        self.string_arguments = string_arguments
        self._cache: dict[str, str | None] = {}
        self.first_error: str | None = None

    def apply(self, params: TemplateParams) -> str | None:
        key = json.dumps([params.messages, params.tools, params.add_generation_prompt, params.enable_thinking,
                          params.extra_context], sort_keys=False, default=str)
        if key in self._cache:
            return self._cache[key]
        messages = normalize_messages(list(params.messages), self.caps)
        if self.string_arguments:
            messages = [with_string_arguments(m) for m in messages]
        try:
            ctx = render_context(messages, tools=params.tools, add_generation_prompt=params.add_generation_prompt,
                                 enable_thinking=params.enable_thinking,
                                 extra_context={**dict(params.extra_context),
                                                "enable_thinking": params.enable_thinking}, cpp_context=True)
            t = self.template
            out: str | None = run_template(t, ctx, name=t.name or "<template>", time_limit=t.time_limit,
                                           max_output=t.max_output, now=_FIXED_NOW)
        except Exception as err:  # the C++ maps every render exception to its error sentinel
            out = None
            if self.first_error is None:
                self.first_error = str(err)
        self._cache[key] = out
        return out

    @property
    def rendered_any(self) -> bool:
        return any(v is not None for v in self._cache.values())

    def compare_variants(self, params_a: TemplateParams,
                         modify: Callable[[TemplateParams], TemplateParams]) -> CompareResult | None:
        params_b = modify(params_a)
        out_a = self.apply(params_a)
        out_b = self.apply(params_b)
        if out_a is None or out_b is None:
            return None
        return CompareResult(calculate_diff_split(out_a, out_b), out_a, out_b)


def with_string_arguments(message: Any) -> Any:
    """`message` with each tool call's object arguments as their JSON text."""
    if not isinstance(message, dict) or not isinstance(message.get("tool_calls"), list):
        return message
    calls = []
    for call in message["tool_calls"]:
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("arguments"), dict):
            call = {**call, "function": {**fn, "arguments": json.dumps(fn["arguments"], ensure_ascii=False)}}
        calls.append(call)
    return {**message, "tool_calls": calls}


def compare_variants(renderer: DiffRenderer, params_a: TemplateParams,
                     modify: Callable[[TemplateParams], TemplateParams]) -> CompareResult | None:
    return renderer.compare_variants(params_a, modify)
