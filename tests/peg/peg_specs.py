"""Random grammars as nested tuples (`("seq", (("lit", "a"), ("chars", "[0-9]", 1, -1)))`) and the parsers
they stand for: shared by the engine's property tests (test_properties.py) and the regex fast path's
(test_regular.py), each drawing the kinds it needs."""

from __future__ import annotations

from typing import Any

from autoparser.peg import Builder, P

Spec = tuple[Any, ...]


def build(b: Builder, spec: Spec) -> P:
    kind = spec[0]
    if kind == "lit":
        return b.literal(spec[1])
    if kind == "chars":
        return b.chars(spec[1], spec[2], spec[3])
    if kind == "any":
        return b.any()
    if kind == "space":
        return b.space()
    if kind == "eps":
        return b.eps()
    if kind == "until":
        return b.until(spec[1][0]) if len(spec[1]) == 1 else b.until_one_of(spec[1])
    if kind == "rest":
        return b.rest()
    if kind == "upto":
        return b.until_one_of(spec[1]) + b.literal(spec[1][0])
    if kind == "str":
        return b.literal(spec[1]) + b.string_content(spec[1]) + b.literal(spec[1])
    if kind == "body":  # a string body alone: the node ends before its delimiter
        return b.string_content(spec[1])
    if kind == "json":
        return b.json()
    if kind == "ref":
        return b.ref("r")
    if kind == "seq":
        return b.sequence([build(b, c) for c in spec[1]])
    if kind == "choice":
        return b.choice([build(b, c) for c in spec[1]])
    if kind == "rep":
        return b.repeat(build(b, spec[1]), spec[2], spec[3])
    if kind == "peek":
        return b.peek(build(b, spec[1]))
    if kind == "not":
        return b.negate(build(b, spec[1]))
    if kind == "tag":
        return b.tag(spec[1], build(b, spec[2]))
    if kind == "atomic":
        return b.atomic(build(b, spec[1]))
    if kind == "rule":
        return b.rule(spec[1], build(b, spec[2]))
    raise AssertionError(kind)
