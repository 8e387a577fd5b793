"""The 81 JSON-Schema -> GBNF cases of llama.cpp's test-json-schema-to-grammar.cpp (tests/data, produced by
the C++ suite): success cases byte-equal after the C++ test's indentation trim, failure cases raise."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from autoparser.errors import SchemaError
from autoparser.gbnf.from_schema import compile_schema, json_schema_to_grammar
from autoparser.testing.ratchet import Ratchet

DATA = Path(__file__).resolve().parent.parent / "data"
CASES = [json.loads(line) for line in (DATA / "json_schema_to_gbnf.jsonl").read_text(encoding="utf-8").splitlines()]
RATCHET = Ratchet(DATA / "ratchet" / "json_schema_to_gbnf.json")


def trim(s: str) -> str:
    """What the C++ test compares: outer whitespace stripped, each line's leading indentation removed."""
    return re.sub(r"(^|\n)[ \t]+", r"\1", s.strip(" \n\r\t"))


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_json_schema_case(case: dict[str, Any]) -> None:
    schema = json.loads(case["schema"])
    failure = None
    if case["expected_status"] == "failure":
        try:
            got = json_schema_to_grammar(schema)
            failure = f"expected a SchemaError, got a grammar:\n{got}"
        except SchemaError:
            pass
    else:
        try:
            got = json_schema_to_grammar(schema)
            if trim(got) != trim(case["expected_grammar"]):
                failure = f"grammar differs:\n--- C++\n{trim(case['expected_grammar'])}\n--- ours\n{trim(got)}"
        except SchemaError as e:
            failure = f"raised {e}"
    RATCHET.check(case["name"], failure)


def test_ratchet_names_real_cases() -> None:
    RATCHET.check_known(c["name"] for c in CASES)


@pytest.mark.parametrize("schema, path", [
    ({"type": "object", "properties": {"a": {"type": "wat"}}}, "#/properties/a"),
    ({"type": "array", "items": {"type": "string", "minLength": -1}}, "#/items"),
    ({"anyOf": []}, "#/anyOf"),
    ({"$ref": "#/$defs/missing"}, "#"),
    ({"$ref": "http://example.com/s.json"}, "#"),
    ([1, 2], "#"),
])
def test_unsupported_schema_names_the_node(schema: Any, path: str) -> None:
    with pytest.raises(SchemaError) as err:
        json_schema_to_grammar(schema)
    assert err.value.path == path
    assert path in str(err.value)


def test_invalid_pattern_is_an_error_unsupported_pattern_degrades() -> None:
    with pytest.raises(SchemaError, match="unbalanced parentheses"):
        json_schema_to_grammar({"type": "string", "pattern": "^(ab$"})
    # an unanchored pattern has no grammar equivalent: any string, not an error
    assert "root ::= string" in json_schema_to_grammar({"type": "string", "pattern": "ab"})


def test_recursive_defs_and_pointers() -> None:
    schema = {"$defs": {"node": {"type": "object", "properties": {"kids": {"type": "array",
                                                                          "items": {"$ref": "#/$defs/node"}}}}},
              "$ref": "#/$defs/node"}
    g = json_schema_to_grammar(schema)
    assert "ref-defs-node ::=" in g and "ref-defs-node-kids-item" not in g.split("ref-defs-node ::=")[0]
    doc = compile_schema({"type": "object", "properties": {"a/b": {"type": "string"}, "n": {"type": "integer"}}})
    assert doc.resolve_pointer("/properties/a~1b").may_be_string()
    assert not doc.resolve_pointer("/properties/n").may_be_string()
    assert doc.resolve_pointer("/properties/n").value_types() == frozenset({"integer"})


def test_deeply_nested_schema_is_a_clean_error() -> None:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(5000):
        schema = {"type": "array", "items": schema}
    with pytest.raises(SchemaError):
        json_schema_to_grammar(schema)
