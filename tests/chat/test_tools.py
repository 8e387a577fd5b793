"""Tool-parameter typing the chat formats rely on (`foreach_parameter`, `value_types`, `may_be_string`), read
off the one compiled schema model (gbnf/schema.py) that the GBNF converter uses too.

The conformance cases only use plain typed properties and simple unions; these cover the other schema shapes
the C++ schema builder accepts (type lists, $ref and cycles, allOf, const/enum, untyped schemas).
"""

from __future__ import annotations

from typing import Any

import pytest

from autoparser.chat.tools import Function, functions, parameters
from autoparser.errors import GrammarError, SchemaError
from autoparser.gbnf.schema import TYPES_ALL, SchemaNode, compile_schema


def _node(schema: Any, pointer: str = "") -> SchemaNode:
    return compile_schema(schema).resolve_pointer(pointer)


def _types(schema: Any, pointer: str = "") -> set[str]:
    return set(_node(schema, pointer).value_types())


def test_value_types_of_leaves_and_unions() -> None:
    assert _types({"type": "number"}) == {"number", "integer"}
    assert _types({"type": "integer"}) == {"integer"}
    assert _types({"type": ["string", "null"]}) == {"string", "null"}
    assert _types({"anyOf": [{"type": "object"}, {"type": "array"}]}) == {"object", "array"}
    assert _types({"const": 3}) == {"integer"}
    assert _types({"enum": ["a", 1.5, None]}) == {"string", "number", "null"}
    assert _types({}) == set(TYPES_ALL)
    assert _types({"maxLength": 3}) == {"string"}  # string keywords without a type make a string
    assert _types({"allOf": [{"type": ["string", "integer"]}, {"type": "integer"}]}) == {"integer"}


def test_refs_resolve_and_cycles_add_nothing() -> None:
    root = {"$defs": {"s": {"type": "string"}, "loop": {"$ref": "#/$defs/loop"}},
            "properties": {"a": {"$ref": "#/$defs/s"}, "b": {"$ref": "#/$defs/loop"}}}
    assert _types(root, "/properties/a") == {"string"}
    assert _types(root, "/properties/b") == set()
    assert _node(root, "/properties/a").may_be_string()
    assert not _node(root, "/properties/b").may_be_string()
    with pytest.raises(SchemaError):
        compile_schema({"$ref": "#/nowhere"})


def test_a_refs_escaped_tokens_name_the_keys_they_escape() -> None:
    """A `$ref` is a JSON pointer: `~1` in a token stands for `/` and `~0` for `~` (RFC 6901; SGLang's GLM-4.7
    schema tests). llama.cpp looks the escaped token up, finds no such key and refuses the schema."""
    for defs in ("$defs", "definitions"):
        root = {defs: {"a/b~c": {"type": "integer"}}, "type": "object",
                "properties": {"value": {"$ref": f"#/{defs}/a~1b~0c"}}}
        assert _types(root, "/properties/value") == {"integer"}
    with pytest.raises(SchemaError):
        compile_schema({"$defs": {"a~1b": {"type": "integer"}}, "$ref": "#/$defs/a~1b"})


def test_may_be_string_ignores_unconstrained_branches() -> None:
    assert not _node({}).may_be_string()  # any value, but not declared a string
    assert _node({"anyOf": [{"type": "integer"}, {"const": "x"}]}).may_be_string()
    assert _node({"allOf": [{}, {"type": "string"}]}).may_be_string()
    assert not _node({"allOf": [{}]}).may_be_string()
    assert not _node({"allOf": [{"type": "string"}, {"type": "integer"}]}).may_be_string()


def _function(fn: dict[str, Any]) -> Function:
    (function,) = functions([{"type": "function", "function": fn}])
    return function


def test_parameters_only_for_object_roots_in_schema_order() -> None:
    fn = {"name": "f", "parameters": {"type": "object", "required": ["b"],
                                      "properties": {"b": {"type": "integer"}, "a/x": {"type": "string"}}}}
    function = _function(fn)
    props = parameters(function)
    assert [(p.name, p.required, p.pointer) for p in props] == [("b", True, "/properties/b"),
                                                                ("a/x", False, "/properties/a~1x")]
    assert [(p.types, p.may_be_string) for p in props] == [({"integer"}, False), ({"string"}, True)]
    assert function.schema is fn["parameters"]
    assert parameters(_function({"name": "g", "parameters": {"type": ["object", "null"],
                                                             "properties": {"x": {}}}})) == []
    assert parameters(_function({"name": "h"})) == []  # missing parameters read as an empty object
    with pytest.raises(SchemaError):
        parameters(_function({"name": "k", "parameters": {"type": "object", "properties": {"x": {"type": "weird"}}}}))


def test_functions_follow_the_two_upstream_walks() -> None:
    tools = [{"type": "function", "function": {"name": "a"}}, {"function": {"name": "b"}}, {"type": "x"}]
    assert [f.name for f in functions(tools)] == ["a"]  # foreach_function
    assert [f.name for f in functions(tools, typed=False)] == ["a", "b"]  # chat-peg-parser.cpp
    with pytest.raises(GrammarError, match="without a function name"):
        functions([{"type": "function", "function": {"description": "no name"}}])
