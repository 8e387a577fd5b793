"""String helpers of the differential analyzer against the C++ unit-test vectors (test-chat-auto-parser.cpp).

tests/data/diff_vectors.json was extracted from the C++ test source (every calculate_diff_split call with the
fields it asserts, and the until_common_prefix / after_common_suffix assertions).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from autoparser.template.diff import (
    DiffSplit,
    Segment,
    SegmentType,
    after_common_suffix,
    calculate_diff_split,
    prune_whitespace_segments,
    segmentize_markers,
    trim_trailing_whitespace,
    trim_whitespace,
    until_common_prefix,
)

VECTORS: dict[str, list[dict[str, Any]]] = json.loads(
    (Path(__file__).parent.parent / "data" / "diff_vectors.json").read_text(encoding="utf-8"))

M, T = SegmentType.MARKER, SegmentType.TEXT


@pytest.mark.parametrize("case", VECTORS["diff_split"], ids=lambda c: f"{c['left'][:30]!r}|{c['right'][:30]!r}")
def test_calculate_diff_split_cpp_vectors(case: dict[str, Any]) -> None:
    got = calculate_diff_split(case["left"], case["right"])
    for field, want in case["expected"].items():
        assert getattr(got, field) == want, field


@pytest.mark.parametrize("case", VECTORS["until_common_prefix"], ids=lambda c: repr(c["args"][0][:30]))
def test_until_common_prefix_cpp_vectors(case: dict[str, Any]) -> None:
    assert until_common_prefix(*case["args"]) == case["expected"]


@pytest.mark.parametrize("case", VECTORS["after_common_suffix"], ids=lambda c: repr(c["args"][0][:30]))
def test_after_common_suffix_cpp_vectors(case: dict[str, Any]) -> None:
    assert after_common_suffix(*case["args"]) == case["expected"]


def test_vector_file_is_complete() -> None:
    assert len(VECTORS["diff_split"]) >= 35
    assert VECTORS["until_common_prefix"] and VECTORS["after_common_suffix"]


@pytest.mark.parametrize(("left", "right", "want"), [
    ("hello world", "hello test", DiffSplit("hello ", "", "world", "test")),
    ("left", "right", DiffSplit("", "t", "lef", "righ")),
    ("aa", "ab", DiffSplit("a", "", "a", "b")),
    ("ab", "a", DiffSplit("a", "", "b", "")),
    ("prefix<tag>", "prefix</tag>suffix", DiffSplit("prefix", "", "<tag>", "</tag>suffix")),
    ("prefix<div>content</div>", "prefix<div>different</div>", DiffSplit("prefix<div>", "ent</div>", "cont", "differ")),
    ("<tag>left</tag>", "<tag>righ</tag>", DiffSplit("<tag>", "</tag>", "left", "righ")),
    ("PREFIX</think>Sure", "PREFIX<think>Lemme think</think>Sure",
     DiffSplit("PREFIX", "</think>Sure", "", "<think>Lemme think")),
    ("same", "same", DiffSplit("same", "", "", "")),
    ("", "xyz", DiffSplit("", "", "", "xyz")),
    ("abc", "", DiffSplit("", "", "abc", "")),
    # B = A + generation prompt with a shared trailing "\n" segment: no rotation into the suffix.
    ("<|im_start|>user\nhi<|im_end|>\n", "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
     DiffSplit("<|im_start|>user\nhi<|im_end|>\n", "", "", "<|im_start|>assistant\n")),
])
def test_spec_reference_cases(left: str, right: str, want: DiffSplit) -> None:
    assert calculate_diff_split(left, right) == want


def test_segmentize_markers() -> None:
    assert segmentize_markers("<|tool_call|>[args]{ are here }[/args]<|tool_call_end|>") == [
        Segment(M, "<|tool_call|>"), Segment(M, "[args]"), Segment(T, "{ are here }"), Segment(M, "[/args]"),
        Segment(M, "<|tool_call_end|>")]
    # nesting is ignored, the other bracket kind is plain text inside a marker
    assert segmentize_markers("a<b[c>d]") == [Segment(T, "a"), Segment(M, "<b[c>"), Segment(T, "d]")]
    # an unterminated marker at the end is text, split from the text before it
    assert segmentize_markers("text<unclosed") == [Segment(T, "text"), Segment(T, "<unclosed")]
    assert segmentize_markers("") == []


def test_prune_whitespace_segments() -> None:
    segs = segmentize_markers("<tool_call>\n<function=foo>\n   \n</function>\n</tool_call>")
    assert [s.value for s in prune_whitespace_segments(segs)] == [
        "<tool_call>", "<function=foo>", "</function>", "</tool_call>"]


def test_trim_is_ascii_isspace_only() -> None:
    assert trim_whitespace(" \t\nx\v\f\r ") == "x"
    assert trim_whitespace("\u00a0x\u3000") == "\u00a0x\u3000"
    assert trim_trailing_whitespace("   ") == ""
