"""Partial ("need more input") parsing: the "partial parsing" group of llama.cpp tests/peg-parser/test-basic.cpp,
plus the partial rules of the engine that the streaming chat layer relies on (`parser_executor`, peg-parser.cpp).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoparser.peg import Builder, P, ResultType, build_peg_parser

S, F, M = ResultType.SUCCESS, ResultType.FAIL, ResultType.NEED_MORE_INPUT

# (case name in the C++, parser, input, partial, expected)
CASES = [
    ("literal_success", lambda p: p.literal("hello"), "hello", False, S),
    ("char_class_lowercase_success", lambda p: p.chars("a-z"), "a", False, S),
    ("char_class_uppercase_fail", lambda p: p.chars("a-z"), "A", False, F),
    ("char_class_with_dash_lowercase", lambda p: p.chars("a-z-"), "f", False, S),
    ("char_class_with_dash_literal_dash", lambda p: p.chars("a-z-"), "-", False, S),
    ("char_class_with_dash_uppercase_fail", lambda p: p.chars("a-z-"), "A", False, F),
    ("sequence_partial_match_1", lambda p: p.literal("<think>") + p.literal("</think>"), "<thi", True, M),
    ("sequence_partial_match_2", lambda p: p.literal("begin") + p.literal("end"), "begin", True, M),
    ("sequence_partial_match_3", lambda p: p.literal("<think>") + p.literal("</think>"), "<think></", True, M),
    ("sequence_full_match", lambda p: p.literal("hello") + p.literal("world"), "helloworld", False, S),
    ("sequence_no_match", lambda p: p.literal("<think>") + p.literal("</think>"),
     "<think>I am common_chat_combinator_parser", True, F),
    ("choices_partial_match_1", lambda p: p.literal("option1") | p.literal("option2"), "opt", True, M),
    ("choices_partial_match_2", lambda p: p.literal("choice_a") | p.literal("choice_b"), "choice", True, M),
    ("choices_full_match_1", lambda p: p.literal("first") | p.literal("second"), "first", False, S),
    ("choices_full_match_2", lambda p: p.literal("alpha") | p.literal("beta"), "beta", False, S),
    ("choices_no_match", lambda p: p.literal("good") | p.literal("better"), "best", False, F),
    ("zero_or_more_partial_match_1", lambda p: p.zero_or_more(p.literal("ab")), "a", True, M),
    ("zero_or_more_partial_match_2", lambda p: p.zero_or_more(p.literal("xy")), "xyx", True, M),
    ("zero_or_more_full_match", lambda p: p.zero_or_more(p.literal("test")), "test", False, S),
    ("one_or_more_partial_match_1", lambda p: p.one_or_more(p.literal("repeat")), "rep", True, M),
    ("one_or_more_partial_match_2", lambda p: p.one_or_more(p.literal("ab")), "aba", True, M),
    ("one_or_more_full_match", lambda p: p.one_or_more(p.literal("single")), "single", False, S),
    ("one_or_more_no_match", lambda p: p.one_or_more(p.literal("()")), "success", False, F),
]


@pytest.mark.parametrize(("build", "text", "partial", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_partial_parsing(build: Callable[[Builder], P], text: str, partial: bool, expected: ResultType) -> None:
    assert build_peg_parser(build).parse(text, partial=partial).type == expected


# --- engine rules behind those cases -----------------------------------------------------------------------------

def test_truncated_literal_is_fail_in_strict_mode() -> None:
    assert build_peg_parser(lambda p: p.literal("hello")).parse("hel").type == F


def test_literal_need_more_end_is_end_of_input() -> None:
    r = build_peg_parser(lambda p: p.literal("ab") + p.literal("cdef")).parse("abcd", partial=True)
    assert (r.type, r.end) == (M, 4)


def test_optional_at_end_of_input_succeeds_even_when_partial() -> None:
    # the repetition never tries its child at the end of the input
    r = build_peg_parser(lambda p: p.literal("a") + p.optional(p.literal("b"))).parse("a", partial=True)
    assert (r.type, r.end) == (S, 1)


def test_end_is_never_need_more() -> None:
    parser = build_peg_parser(lambda p: p.literal("a") + p.end())
    assert parser.parse("a", partial=True).type == S
    assert parser.parse("ab", partial=True).type == F


def test_rest_is_need_more_when_partial() -> None:
    parser = build_peg_parser(lambda p: p.rest())
    assert parser.parse("abc").type == S
    r = parser.parse("abc", partial=True)
    assert (r.type, r.end) == (M, 3)


def test_until_stops_before_a_cut_off_delimiter_in_both_modes() -> None:
    parser = build_peg_parser(lambda p: p.until("</tool>"))
    for partial in (False, True):
        r = parser.parse("abc</to", partial=partial)
        assert (r.type, r.end) == (S, 3)


def test_until_shortest_delimiter_wins() -> None:
    r = build_peg_parser(lambda p: p.until_one_of(["</a>", "</"])).parse("xy</a>")
    assert (r.type, r.end) == (S, 2)


def test_rule_node_marked_partial() -> None:
    parser = build_peg_parser(lambda p: p.rule("greet", p.literal("hello") + p.literal(" world")))
    r = parser.parse("hello wo", partial=True)
    assert r.type == M
    [node] = r.walk()
    assert (node.rule, node.is_partial, node.text) == ("greet", True, "hello wo")
    done = parser.parse("hello world")
    assert [n.is_partial for n in done.walk()] == [False]


def test_sequence_need_more_keeps_nodes_fail_drops_them() -> None:
    parser = build_peg_parser(lambda p: p.tag("a", p.literal("a")) + p.tag("b", p.literal("bc")))
    partial = parser.parse("ab", partial=True)
    assert partial.type == M
    assert [(n.tag, n.text, n.is_partial) for n in partial.walk()] == [("a", "a", False), ("b", "b", True)]
    failed = parser.parse("ax")
    assert failed.type == F
    assert failed.nodes == ()


def test_atomic_drops_nodes_of_a_partial_match() -> None:
    parser = build_peg_parser(lambda p: p.tag("outer", p.atomic(p.tag("name", p.literal("special_function")))))
    r = parser.parse("special_fu", partial=True)
    assert r.type == M
    assert [n.tag for n in r.walk()] == ["outer"]
    full = parser.parse("special_function")
    assert [n.tag for n in full.walk()] == ["outer", "name"]


def test_negate_propagates_need_more() -> None:
    parser = build_peg_parser(lambda p: p.negate(p.literal("abc")) + p.any())
    assert parser.parse("ab", partial=True).type == M
    assert parser.parse("ab").type == S
    assert parser.parse("abc").type == F


def test_peek_returns_child_type_without_consuming() -> None:
    parser = build_peg_parser(lambda p: p.peek(p.literal("ab")))
    r = parser.parse("abc")
    assert (r.type, r.end) == (S, 0)
    assert parser.parse("a", partial=True).type == M
    assert parser.parse("x").type == F


def test_choice_returns_first_non_fail_even_if_partial() -> None:
    # the first alternative is still possible, so its NEED_MORE wins over a complete second alternative
    parser = build_peg_parser(lambda p: p.literal("abc") | p.literal("a"))
    r = parser.parse("ab", partial=True)
    assert (r.type, r.end) == (M, 2)


def test_string_content_unterminated() -> None:
    parser = build_peg_parser(lambda p: p.string_content('"'))
    r = parser.parse("abc", partial=True)
    assert (r.type, r.end) == (M, 3)
    assert parser.parse("abc").type == F


def test_chars_with_min_satisfied_at_end_is_success_when_partial() -> None:
    r = build_peg_parser(lambda p: p.chars("[a-z]")).parse("abc", partial=True)
    assert (r.type, r.end) == (S, 3)
    r = build_peg_parser(lambda p: p.chars("[a-z]", 4, 4)).parse("abc", partial=True)
    assert r.type == M


def test_parse_from_start_offset() -> None:
    parser = build_peg_parser(lambda p: p.literal("b") + p.start())
    assert parser.parse("ab", start=1).type == F  # start() only matches position 0
    r = build_peg_parser(lambda p: p.literal("b")).parse("ab", start=1)
    assert (r.type, r.start, r.end) == (S, 1, 2)


@given(delimiters=st.lists(st.text("<>/ab\n", min_size=1, max_size=6), min_size=1, max_size=4),
       window=st.text("<>/ab\nxy", max_size=24))
@settings(max_examples=600, deadline=None)
def test_a_resumed_until_stops_where_the_one_search_did(delimiters: list[str], window: str) -> None:
    # The streaming check of an `until` (peg/resume.py) tries a first-character scan, the delimiters, then a
    # cut-off delimiter near the end only; it must decide as one search for a delimiter anywhere or a proper
    # prefix of one ending the window does.
    import re

    from autoparser.peg.engine import cut_delimiter_pattern
    from autoparser.peg.resume import until_check

    usable = sorted(set(delimiters), key=len)
    one = [re.escape(d) for d in usable] + ([cut] if (cut := cut_delimiter_pattern(usable)) else [])
    check, lookback = until_check(tuple(delimiters))
    assert check(window) == (re.search("|".join(one), window) is None)
    assert lookback == max(len(d) for d in usable) - 1
