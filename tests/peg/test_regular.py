"""peg/regular.py: a rule-free subtree as one regex, against the engine's closures on random such subtrees.

The generated code tries that regex first and keeps its match only when it ends `reach` characters before the
end of the text (peg/codegen.py). Here, on every prefix of the text and in both modes: where the regex decides,
the engine succeeds at the same end without any end-of-input decision; and where the engine decides without
one, the regex matches exactly when and as far as the engine does (so `reach` is the only reason to fall back).
test_properties.py compares the generated code as a whole on random grammars of every kind.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from peg_specs import Spec, build

from autoparser.peg import Builder
from autoparser.peg.engine import SUCCESS_, Ctx, compile_arena
from autoparser.peg.regular import AVAILABLE, regular

pytestmark = pytest.mark.skipif(not AVAILABLE, reason="atomic groups and possessive quantifiers are Python 3.11's")


LITERALS = ["a", "b", "ab", "ba", "<t>", "", "\n", '"']
CLASSES = ["[a-b]", "[^a]", "[0-9]", "[a-z<>/]"]
COUNTS = [(1, -1), (0, -1), (1, 1), (0, 1), (2, 3), (2, 2)]
REPEATS = [(0, 1), (0, -1), (1, -1), (2, 2), (1, 3), (0, 2)]
PIECES = ["a", "b", "ab", "<t>", "<", " ", "\n", '"', "\\", "\\n", "\\u0041", "1", "23", "x", "é", "."]

_leaves = st.one_of(
    st.builds(lambda s: ("lit", s), st.sampled_from(LITERALS)),
    st.builds(lambda c, n: ("chars", c, *n), st.sampled_from(CLASSES), st.sampled_from(COUNTS)),
    st.just(("any",)), st.just(("space",)), st.just(("eps",)),
    st.builds(lambda q: ("body", q), st.sampled_from(['"', "'"])),  # (a string body alone)
)
specs = st.recursive(_leaves, lambda children: st.one_of(
    st.builds(lambda cs: ("seq", tuple(cs)), st.lists(children, min_size=2, max_size=4)),
    st.builds(lambda cs: ("choice", tuple(cs)), st.lists(children, min_size=2, max_size=3)),
    st.builds(lambda c, n: ("rep", c, *n), children, st.sampled_from(REPEATS)),
    st.builds(lambda c: ("peek", c), children),
    st.builds(lambda c: ("not", c), children),
    st.builds(lambda c: ("atomic", c), children),
), max_leaves=10)


@settings(max_examples=600, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(specs, st.lists(st.sampled_from(PIECES), max_size=10))
def test_the_regex_decides_only_what_the_engine_decides(spec: Spec, pieces: list[str]) -> None:
    b = Builder()
    root = build(b, spec)
    arena = b.build(root)
    reg = regular(arena, root.id, {})
    assume(reg is not None)  # (a repetition of something that may match nothing is left to the engine)
    assert reg is not None
    match = re.compile(reg.pattern).match
    fn = compile_arena(arena)[root.id]
    text = "".join(pieces)
    for k in range(len(text) + 1):
        prefix = text[:k]
        for start in {0, min(1, k)}:
            m = match(prefix, start)
            for partial in (True, False):
                ctx = Ctx(prefix, partial)
                t, e, _nodes, _inv = fn(ctx, start)
                if m is not None and m.end() + reg.reach <= k:
                    assert (t, e, ctx.observed) == (SUCCESS_, m.end(), []), (reg.pattern, prefix, start, partial)
                if not ctx.observed:  # decided without looking at the end: the regex says the same
                    assert (m is not None) == (t == SUCCESS_), (reg.pattern, prefix, start, partial, t)
                    assert m is None or m.end() == e, (reg.pattern, prefix, start, partial)


def test_a_json_number_is_one_regex() -> None:
    b = Builder()
    arena = b.build(b.json())
    body = arena.parsers[arena.rules["json-number"]].child  # type: ignore[union-attr]
    reg = regular(arena, body, {})
    assert reg is not None and reg.reach == 3  # `1.`, `1e`, `1e+`: up to three characters looked at past the end
    match = re.compile(reg.pattern).match
    ends = {s: (m.end() if (m := match(s)) else None) for s in ("12,", "-0.5e+3}", "01", "1.x")}
    assert ends == {"12,": 2, "-0.5e+3}": 7, "01": None, "1.x": None}
