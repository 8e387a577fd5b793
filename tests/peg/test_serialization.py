"""Port of llama.cpp tests/peg-parser/test-json-serialization.cpp: save/load round trip parses identically."""

from __future__ import annotations

import json

import pytest

from autoparser.peg import Arena, Builder, P, ResultType, build_peg_parser, load, save
from autoparser.peg.nodes import INVALID_ID


@pytest.fixture(scope="module")
def original() -> Arena:
    return build_peg_parser(lambda p: "<tool_call>" + p.json() + "</tool_call>")


def test_compare_before_after(original: Arena) -> None:
    loaded = load(save(original))
    text = '{"name": "test", "values": [1, 2, 3], "nested": {"a": true}}'
    r1, r2 = original.parse(text), loaded.parse(text)
    assert r1.type == r2.type
    assert r1.end == r2.end


@pytest.mark.parametrize(("text", "partial"), [
    ('<tool_call>{"name": "test", "values": [1, 2, 3], "nested": {"a": true}}</tool_call>', False),
    ('<tool_call>{"name": "te', True),
    ("<tool_call>[1, 2", True),
    ("<tool_call>nope", False),
])
def test_loaded_arena_parses_identically(original: Arena, text: str, partial: bool) -> None:
    loaded = load(save(original))
    r1, r2 = original.parse(text, partial=partial), loaded.parse(text, partial=partial)
    assert (r1.type, r1.end) == (r2.type, r2.end)
    assert [(n.rule, n.tag, n.start, n.end, n.is_partial) for n in r1.walk()] == \
        [(n.rule, n.tag, n.start, n.end, n.is_partial) for n in r2.walk()]


def test_round_trip_is_stable(original: Arena) -> None:
    once = save(original)
    assert save(load(once)) == once


def test_saved_shape(original: Arena) -> None:
    j = json.loads(save(original))
    assert set(j) == {"parsers", "rules", "root"}
    assert len(j["parsers"]) == len(original)
    assert j["root"] == original.root
    assert {"json-value", "json-object", "json-array", "json-string", "json-number"} <= set(j["rules"])
    kinds = {p["type"] for p in j["parsers"]}
    assert {"literal", "sequence", "choice", "rule", "string", "chars", "not", "space"} <= kinds


def test_every_node_kind_round_trips() -> None:
    def build(p: Builder) -> P:
        return p.sequence([
            p.start(), p.eps(), p.literal("a"), p.choice([p.literal("b"), p.any()]), p.repeat("c", 0, 3),
            p.peek(p.literal("d")), p.negate(p.literal("x")), p.space(), p.chars(r"[d-f\u4E00]", 1, 2),
            p.string_content("'"), p.until_one_of(["<", ">"]), p.rest(),
            p.schema(p.literal("s"), "sch", {"type": "string"}), p.atomic(p.literal("t")),
            p.tag("tg", p.literal("u")), p.gbnf(p.literal("v"), '"v"'), p.ac(p.literal("w"), ["w"]),
            p.trigger_rule("trig", p.literal("y")), p.ref("trig"), p.end(),
        ])

    arena = build_peg_parser(build)
    text = save(arena)
    loaded = load(text)
    assert loaded.parsers == arena.parsers
    assert loaded.rules == arena.rules
    assert loaded.root == arena.root
    assert save(loaded) == text


def test_unset_root_round_trips() -> None:
    arena = Arena()
    j = json.loads(save(arena))
    assert j == {"parsers": [], "rules": {}, "root": INVALID_ID}
    assert load(save(arena)).root == INVALID_ID


def test_non_ascii_literals_survive() -> None:
    arena = build_peg_parser(lambda p: p.literal("é😀") + p.until("世"))
    loaded = load(save(arena))
    assert loaded.parse("é😀abc世").type == ResultType.SUCCESS
    assert loaded.parse("é😀abc世").end == 5
