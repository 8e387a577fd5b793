"""Tool-parameter typing the handlers rely on (`foreach_parameter`, `value_types`, `may_be_string`).

The conformance cases only use plain typed properties and simple unions; these cover the other schema shapes
the C++ schema builder accepts (type lists, $ref and cycles, allOf, const/enum, untyped schemas).
"""

from __future__ import annotations

import pytest

from autoparser.chat.handlers._params import ALL_TYPES, may_be_string, parameters, value_types
from autoparser.errors import SchemaError


def _types(schema: object, root: object = None) -> set[str]:
    return set(value_types(schema, root if root is not None else schema))


def test_value_types_of_leaves_and_unions() -> None:
    assert _types({"type": "number"}) == {"number", "integer"}
    assert _types({"type": "integer"}) == {"integer"}
    assert _types({"type": ["string", "null"]}) == {"string", "null"}
    assert _types({"anyOf": [{"type": "object"}, {"type": "array"}]}) == {"object", "array"}
    assert _types({"const": 3}) == {"integer"}
    assert _types({"enum": ["a", 1.5, None]}) == {"string", "number", "null"}
    assert _types({}) == set(ALL_TYPES)
    assert _types({"maxLength": 3}) == {"string"}  # string keywords without a type make a string
    assert _types({"allOf": [{"type": ["string", "integer"]}, {"type": "integer"}]}) == {"integer"}


def test_refs_resolve_and_cycles_add_nothing() -> None:
    root = {"$defs": {"s": {"type": "string"}, "loop": {"$ref": "#/$defs/loop"}},
            "properties": {"a": {"$ref": "#/$defs/s"}, "b": {"$ref": "#/$defs/loop"}}}
    assert _types(root["properties"]["a"], root) == {"string"}
    assert _types(root["properties"]["b"], root) == set()
    assert may_be_string(root["properties"]["a"], root)
    assert not may_be_string(root["properties"]["b"], root)
    with pytest.raises(SchemaError):
        value_types({"$ref": "#/nowhere"}, {})


def test_may_be_string_ignores_unconstrained_branches() -> None:
    assert not may_be_string({}, {})  # any value, but not declared a string
    assert may_be_string({"anyOf": [{"type": "integer"}, {"const": "x"}]}, {})
    assert may_be_string({"allOf": [{}, {"type": "string"}]}, {})
    assert not may_be_string({"allOf": [{}]}, {})
    assert not may_be_string({"allOf": [{"type": "string"}, {"type": "integer"}]}, {})


def test_parameters_only_for_object_roots_in_schema_order() -> None:
    fn = {"name": "f", "parameters": {"type": "object", "required": ["b"],
                                      "properties": {"b": {"type": "integer"}, "a/x": {"type": "string"}}}}
    params, props = parameters(fn)
    assert [(p.name, p.required, p.pointer) for p in props] == [("b", True, "/properties/b"),
                                                                ("a/x", False, "/properties/a~1x")]
    assert params is fn["parameters"]
    assert parameters({"name": "g", "parameters": {"type": ["object", "null"], "properties": {"x": {}}}})[1] == []
    assert parameters({"name": "h"})[1] == []  # missing parameters read as an empty object
    with pytest.raises(SchemaError):
        parameters({"name": "k", "parameters": {"type": "object", "properties": {"x": {"type": "weird"}}}})
