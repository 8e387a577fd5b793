"""The compiled JSON-schema model every caller reads (`common_chat_schema_from_json`, common/json-schema.cpp).

`compile_schema` turns a JSON schema into a typed document: one node per sub-schema, with the C++ node kinds
(any, ref, anyOf, allOf, const, enum, object, array, tuple, string, integer, number, boolean, null), `$ref`
targets resolved, and sub-schemas addressable by JSON pointer. Unsupported input raises SchemaError with the
JSON path of the node. The GBNF converter (from_schema.py), the PEG emitter's schema nodes (from_peg.py) and
the chat formats that type tool arguments (`value_types`, `may_be_string`) all read this one model.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

from autoparser.errors import SchemaError

__all__ = ["INT64_MAX", "INT64_MIN", "TYPES_ALL", "SchemaDocument", "SchemaNode", "compile_schema", "unescape_token"]

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return (isinstance(v, (int, float))) and not isinstance(v, bool)


TYPES_ALL = frozenset({"null", "boolean", "number", "integer", "string", "array", "object"})


class SchemaNode:
    """One node of a compiled schema. `kind` is the C++ node kind name (any, ref, anyOf, allOf, const, ...)."""

    __slots__ = ("additional", "children", "doc", "format", "items", "kind", "max_items", "max_length",
                 "maximum", "min_items", "min_length", "minimum", "pattern", "properties", "ref", "value", "values")

    def __init__(self, kind: str, **fields: Any) -> None:
        self.kind = kind
        self.doc: SchemaDocument | None = None
        self.children: list[SchemaNode] = []
        self.properties: list[tuple[str, SchemaNode, bool]] = []
        self.additional: SchemaNode | None = None
        self.items: Any = None  # SchemaNode for arrays, list[SchemaNode] for tuples
        self.min_items = 0
        self.max_items = -1
        self.pattern = ""
        self.format = ""
        self.min_length = 0
        self.max_length = -1
        self.minimum = INT64_MIN
        self.maximum = INT64_MAX
        self.value: Any = None
        self.values: list[Any] = []
        self.ref = ""
        for k, v in fields.items():
            setattr(self, k, v)

    def target(self) -> SchemaNode | None:
        if self.kind != "ref" or self.doc is None:
            return None
        return self.doc.refs.get(self.ref)

    def value_types(self) -> frozenset[str]:
        return _value_types(self, set())

    def may_be_string(self) -> bool:
        return _may_be_string(self, set())

    def finite_strings(self) -> frozenset[str] | None:
        """The strings the node admits where they are finitely many (an enum's or a const's: `{"enum": ["7", 8]}`
        admits "7" alone), None where any string may do (a string kind, an unconstrained branch)."""
        return _finite_strings(self, set())

    def admits(self, value: Any) -> bool:
        """Whether a JSON value (as `json.loads` gives it) is of a type the node admits, and one of its values
        where it enumerates them (string lengths, patterns and number bounds aside)."""
        return _admits(self, value, set())

    def __repr__(self) -> str:
        return f"SchemaNode({self.kind})"


def _json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if _is_int(v):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


_T = TypeVar("_T")


def _through_ref(s: SchemaNode, visited: set[int], walk: Callable[[SchemaNode, set[int]], _T], default: _T) -> _T:
    """`walk` of a `$ref` node's target, or `default` where it has none or the walk is inside it already (a
    cycle)."""
    t = s.target()
    if t is None or id(t) in visited:
        return default
    visited.add(id(t))
    try:
        return walk(t, visited)
    finally:
        visited.discard(id(t))


def _value_types(s: SchemaNode, visited: set[int]) -> frozenset[str]:
    k = s.kind
    if k == "any":
        return TYPES_ALL
    if k in ("null", "boolean", "integer", "string", "object"):
        return frozenset({k})
    if k == "number":
        return frozenset({"number", "integer"})
    if k in ("array", "tuple"):
        return frozenset({"array"})
    if k == "const":
        return frozenset({_json_type(s.value)})
    if k == "enum":
        return frozenset(_json_type(v) for v in s.values)
    if k == "ref":
        return _through_ref(s, visited, _value_types, frozenset())
    if k == "anyOf":
        acc: frozenset[str] = frozenset()
        for c in s.children:
            acc |= _value_types(c, visited)
        return acc
    if k == "allOf":
        acc = TYPES_ALL
        for c in s.children:
            acc &= _value_types(c, visited)
        return acc
    return frozenset()


def _may_be_string(s: SchemaNode, visited: set[int]) -> bool:
    k = s.kind
    if k == "string":
        return True
    if k == "const":
        return isinstance(s.value, str)
    if k == "enum":
        return any(isinstance(v, str) for v in s.values)
    if k == "ref":
        return _through_ref(s, visited, _may_be_string, False)
    if k == "anyOf":
        return any(_may_be_string(c, visited) for c in s.children)
    if k == "allOf":
        seen = False
        for c in s.children:
            if c.kind == "any":
                continue
            if not _may_be_string(c, visited):
                return False
            seen = True
        return seen
    return False


def _finite_strings(s: SchemaNode, visited: set[int]) -> frozenset[str] | None:
    k = s.kind
    if k in ("string", "any"):
        return None
    if k == "const":
        return frozenset({s.value}) if isinstance(s.value, str) else frozenset()
    if k == "enum":
        return frozenset(v for v in s.values if isinstance(v, str))
    if k == "ref":
        none: frozenset[str] | None = frozenset()  # (a reference it cannot follow admits no string)
        return _through_ref(s, visited, _finite_strings, none)
    if k == "anyOf":
        acc: frozenset[str] = frozenset()
        for c in s.children:
            strings = _finite_strings(c, visited)
            if strings is None:
                return None
            acc |= strings
        return acc
    if k == "allOf":
        bound: frozenset[str] | None = None
        for c in s.children:
            if c.kind == "any":
                continue
            strings = _finite_strings(c, visited)
            if strings is not None:
                bound = strings if bound is None else bound & strings
        return bound
    return frozenset()


def _admits(s: SchemaNode, v: Any, visited: set[int]) -> bool:
    k = s.kind
    if k == "any":
        return True
    if k in ("const", "enum"):  # (JSON equality: `true` is no 1, 1.0 is 1)
        return any(v == e and (_json_type(v) == _json_type(e) or (_is_number(v) and _is_number(e)))
                   for e in (s.values if k == "enum" else [s.value]))
    if k == "ref":
        return _through_ref(s, visited, lambda t, seen: _admits(t, v, seen), False)
    if k == "anyOf":
        return any(_admits(c, v, visited) for c in s.children)
    if k == "allOf":
        return all(_admits(c, v, visited) for c in s.children)
    if k == "number":
        return _is_number(v)
    if k in ("array", "tuple"):
        return isinstance(v, list)
    return _json_type(v) == k


class SchemaDocument:
    """A compiled schema: its root node, the $ref targets, and nodes addressable by JSON pointer."""

    def __init__(self) -> None:
        self.root: SchemaNode = SchemaNode("any")
        self.refs: dict[str, SchemaNode] = {}
        self.pointers: dict[str, SchemaNode] = {}
        self.warnings: list[str] = []
        """Keywords the grammar does not enforce (`multipleOf`, `uniqueItems`, ...), one line each."""

    def resolve_pointer(self, pointer: str) -> SchemaNode:
        """The node compiled from the sub-schema at `pointer` ("" or "#" is the root)."""
        p = pointer[1:] if pointer.startswith("#") else pointer
        if p in ("", "/"):
            return self.root
        node = self.pointers.get(p)
        if node is None:
            raise SchemaError(f"no sub-schema at {pointer}", path=pointer)
        return node


def _escape_token(s: str) -> str:
    return s.replace("~", "~0").replace("/", "~1")


def unescape_token(token: str) -> str:
    """A JSON pointer's reference token as the key it names: `~1` is `/`, `~0` is `~` (RFC 6901)."""
    return token.replace("~1", "/").replace("~0", "~")


# The keywords the compiler reads, and those that only describe (nothing to enforce): any other is warned about.
_READ = frozenset({"$ref", "additionalProperties", "allOf", "anyOf", "const", "enum", "exclusiveMaximum",
                   "exclusiveMinimum", "format", "items", "maxItems", "maxLength", "maximum", "minItems", "minLength",
                   "minimum", "oneOf", "pattern", "prefixItems", "properties", "required", "type"})
_ANNOTATIONS = frozenset({"$schema", "$id", "$comment", "$defs", "definitions", "title", "description", "default",
                          "examples", "deprecated", "readOnly", "writeOnly", "nullable", "strict"})


class _DocBuilder:
    def __init__(self, root: Any, doc: SchemaDocument) -> None:
        self.root = root
        self.doc = doc
        self.refs: dict[str, SchemaNode | None] = {}
        self.pending: list[SchemaNode] = []

    @staticmethod
    def fail(path: str, msg: str) -> SchemaError:
        return SchemaError(msg, path=path)

    def node(self, kind: str, pointer: str | None, **fields: Any) -> SchemaNode:
        n = SchemaNode(kind, **fields)
        n.doc = self.doc
        if pointer is not None:
            self.doc.pointers.setdefault(pointer, n)
        return n

    def get_count(self, schema: dict[str, Any], key: str, path: str, default: int) -> int:
        if key not in schema:
            return default
        v = schema[key]
        if not _is_int(v) or v < 0:
            if isinstance(v, float) and v.is_integer() and v >= 0:
                return int(v)  # nlohmann stores 2.0 as a float: is_number_integer() is false
            raise self.fail(path, f"{key} must be a non-negative integer")
        return int(v)

    def get_bound(self, schema: dict[str, Any], key: str, path: str, round_up: bool) -> int:
        v = schema[key]
        if _is_int(v):
            return int(v)
        if not _is_number(v):
            raise self.fail(path, f"{key} must be a number")
        return int(math.ceil(v) if round_up else math.floor(v))

    def get_format(self, schema: dict[str, Any], path: str) -> str:
        if "format" not in schema:
            return ""
        v = schema["format"]
        if not isinstance(v, str):
            raise self.fail(path, "format must be a string")
        if v in ("date", "time", "date-time"):
            return v
        if v == "uuid" or (len(v) == 5 and v.startswith("uuid") and "1" <= v[4] <= "5"):
            return "uuid"
        return ""

    def resolve_ref(self, ref: str, path: str) -> tuple[Any, str]:
        target = self.root
        tokens = ref[1:].split("/")
        pointer = ""
        for token in tokens[1:]:
            # a reference token escapes `/` and `~` (RFC 6901); llama.cpp looks the escaped token up
            sel = unescape_token(token)
            if isinstance(target, dict) and sel in target:
                target = target[sel]
            elif isinstance(target, list):
                try:
                    idx = int(sel)
                except ValueError:
                    idx = len(target)
                if not 0 <= idx < len(target):
                    raise self.fail(path, f"cannot resolve $ref {ref}, {sel} is out of range")
                target = target[idx]
            else:
                raise self.fail(path, f"cannot resolve $ref {ref}, {sel} not found")
            pointer += "/" + _escape_token(sel)
        return target, pointer

    def build_ref(self, value: Any, path: str, pointer: str | None) -> SchemaNode:
        if not isinstance(value, str):
            raise self.fail(path, "$ref must be a string")
        if not value.startswith("#/"):
            raise self.fail(path, f"unsupported $ref {value}, only references into the same document are supported")
        if value not in self.refs:
            self.refs[value] = None
            target, target_pointer = self.resolve_ref(value, path)
            self.refs[value] = self.build(target, value, target_pointer)
        n = self.node("ref", pointer, ref=value)
        self.pending.append(n)
        return n

    def alternatives(self, kind: str, alts: Any, path: str, pointer: str | None) -> SchemaNode:
        if not isinstance(alts, list):
            raise self.fail(path, "must be an array of schemas")
        if not alts:
            raise self.fail(path, "must not be empty")
        n = self.node(kind, pointer)
        key = path.rsplit("/", 1)[-1]
        for i, alt in enumerate(alts):
            child_ptr = f"{pointer}/{key}/{i}" if pointer is not None else None
            n.children.append(self.build(alt, f"{path}/{i}", child_ptr))
        return n

    def build_object(self, schema: dict[str, Any], path: str, pointer: str | None) -> SchemaNode:
        n = self.node("object", pointer)
        required: set[str] = set()
        if isinstance(schema.get("required"), list):
            required = {r for r in schema["required"] if isinstance(r, str)}
        if "properties" in schema:
            props = schema["properties"]
            if not isinstance(props, dict):
                raise self.fail(path, "properties must be an object")
            for name, prop in props.items():
                sub_ptr = f"{pointer}/properties/{_escape_token(name)}" if pointer is not None else None
                n.properties.append((name, self.build(prop, f"{path}/properties/{name}", sub_ptr), name in required))
        if "additionalProperties" in schema:
            add = schema["additionalProperties"]
            if isinstance(add, bool):
                if add:
                    n.additional = self.node("any", None)
            elif isinstance(add, dict):
                sub_ptr = f"{pointer}/additionalProperties" if pointer is not None else None
                n.additional = self.build(add, f"{path}/additionalProperties", sub_ptr)
            else:
                raise self.fail(path, "additionalProperties must be a boolean or a schema")
        elif "properties" not in schema:
            n.additional = self.node("any", None)
        return n

    def build_array(self, schema: dict[str, Any], path: str, pointer: str | None) -> SchemaNode:
        if "items" in schema or "prefixItems" in schema:
            key = "items" if "items" in schema else "prefixItems"
            items = schema[key]
            if isinstance(items, list):
                tup = self.node("tuple", pointer)
                tup.items = [self.build(item, f"{path}/{key}/{i}",
                                        f"{pointer}/{key}/{i}" if pointer is not None else None)
                             for i, item in enumerate(items)]
                return tup
            n = self.node("array", pointer)
            n.items = self.build(items, f"{path}/{key}", f"{pointer}/{key}" if pointer is not None else None)
        else:
            n = self.node("array", pointer)
            n.items = self.node("any", None)
        n.min_items = self.get_count(schema, "minItems", path, 0)
        n.max_items = self.get_count(schema, "maxItems", path, -1)
        self.check_bounds(path, "minItems", n.min_items, "maxItems", n.max_items, "array")
        return n

    def check_bounds(self, path: str, low_key: str, low: int, high_key: str, high: int, what: str) -> None:
        """Bounds no value fits (`minLength` 5, `maxLength` 2) are refused here: llama.cpp turns them into a
        repetition `{5,2}` that its grammar parser cannot load (it hangs on it), so no grammar is better."""
        if high >= 0 and low > high:
            raise self.fail(path, f"{low_key} {low} exceeds {high_key} {high}: no {what} fits")

    def build_string(self, schema: dict[str, Any], path: str, pointer: str | None) -> SchemaNode:
        n = self.node("string", pointer)
        if "pattern" in schema:
            if not isinstance(schema["pattern"], str):
                raise self.fail(path, "pattern must be a string")
            n.pattern = schema["pattern"]
        n.format = self.get_format(schema, path)
        n.min_length = self.get_count(schema, "minLength", path, 0)
        n.max_length = self.get_count(schema, "maxLength", path, -1)
        self.check_bounds(path, "minLength", n.min_length, "maxLength", n.max_length, "string")
        return n

    def build_integer(self, schema: dict[str, Any], path: str, pointer: str | None) -> SchemaNode:
        n = self.node("integer", pointer)
        if "minimum" in schema:
            n.minimum = self.get_bound(schema, "minimum", path, True)
        elif "exclusiveMinimum" in schema:
            n.minimum = self.get_bound(schema, "exclusiveMinimum", path, False) + 1
        if "maximum" in schema:
            n.maximum = self.get_bound(schema, "maximum", path, False)
        elif "exclusiveMaximum" in schema:
            n.maximum = self.get_bound(schema, "exclusiveMaximum", path, True) - 1
        if n.minimum > n.maximum:
            raise self.fail(path, f"the lower bound {n.minimum} exceeds the upper bound {n.maximum}: no integer fits")
        return n

    def build(self, schema: Any, path: str, pointer: str | None) -> SchemaNode:
        if not isinstance(schema, dict):
            raise self.fail(path, "schema must be an object")
        for key in schema:
            if key not in _READ and key not in _ANNOTATIONS:
                self.doc.warnings.append(f"{key!r} at {path} is not supported: the grammar does not enforce it")
        if "$ref" in schema:
            return self.build_ref(schema["$ref"], path, pointer)
        if "oneOf" in schema or "anyOf" in schema:
            key = "oneOf" if "oneOf" in schema else "anyOf"
            return self.alternatives("anyOf", schema[key], f"{path}/{key}", pointer)
        typ = schema.get("type")
        if isinstance(typ, list):
            if not typ:
                raise self.fail(path, "type must not be empty")
            n = self.node("anyOf", pointer)
            for i, t in enumerate(typ):
                n.children.append(self.build(dict(schema, type=t), f"{path}/type/{i}", None))
            return n
        if "const" in schema:
            return self.node("const", pointer, value=schema["const"])
        if "enum" in schema:
            values = schema["enum"]
            if not isinstance(values, list) or not values:
                raise self.fail(path, "enum must be a non-empty array")
            return self.node("enum", pointer, values=list(values))
        if typ is not None and not isinstance(typ, str):
            raise self.fail(path, "type must be a string or an array of strings")
        type_name = typ or ""
        has_props = "properties" in schema or (
            "additionalProperties" in schema and schema["additionalProperties"] is not True)
        if not type_name:
            if has_props:
                return self.build_object(schema, path, pointer)
            if "allOf" in schema:
                return self.alternatives("allOf", schema["allOf"], f"{path}/allOf", pointer)
            if "items" in schema or "prefixItems" in schema:
                return self.build_array(schema, path, pointer)
            if "pattern" in schema or "minLength" in schema or "maxLength" in schema or self.get_format(schema, path):
                return self.build_string(schema, path, pointer)
            return self.node("any", pointer)
        if type_name == "object":
            if not has_props and "allOf" in schema:
                return self.alternatives("allOf", schema["allOf"], f"{path}/allOf", pointer)
            return self.build_object(schema, path, pointer)
        if type_name == "string":
            if "allOf" in schema:
                return self.alternatives("allOf", schema["allOf"], f"{path}/allOf", pointer)
            return self.build_string(schema, path, pointer)
        if type_name == "array":
            return self.build_array(schema, path, pointer)
        if type_name == "integer":
            return self.build_integer(schema, path, pointer)
        if type_name in ("number", "boolean", "null"):
            return self.node(type_name, pointer)
        raise self.fail(path, f"unrecognized type {type_name}")


def compile_schema(schema: Any) -> SchemaDocument:
    """The typed document of a JSON schema (`common_chat_schema_from_json`). Raises SchemaError with a path."""
    doc = SchemaDocument()
    b = _DocBuilder(schema, doc)
    try:
        doc.root = b.build(schema, "#", "")
    except RecursionError:
        raise SchemaError("schema nested too deeply", path="#") from None
    for ref, node in b.refs.items():
        if node is not None:
            doc.refs[ref] = node
    return doc

