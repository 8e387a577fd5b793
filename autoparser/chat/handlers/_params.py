"""Tool parameters as the handlers see them (`foreach_parameter`, `common_chat_schema::value_types`).

The C++ builds a typed schema document and asks each property node which JSON types a value may take; the
handlers only need the properties of an object schema and that type set, so both are read straight off the
JSON schema here, following the same keyword precedence as `common_chat_schema_from_json`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from autoparser.errors import SchemaError
from autoparser.types import tool_parameters

# value_type of the C++ schema model
TYPE_NULL = "null"
TYPE_BOOLEAN = "boolean"
TYPE_NUMBER = "number"
TYPE_INTEGER = "integer"
TYPE_STRING = "string"
TYPE_ARRAY = "array"
TYPE_OBJECT = "object"
ALL_TYPES = frozenset({TYPE_NULL, TYPE_BOOLEAN, TYPE_NUMBER, TYPE_INTEGER, TYPE_STRING, TYPE_ARRAY, TYPE_OBJECT})


@dataclass(frozen=True)
class Parameter:
    """One property of a tool's parameters: its schema, whether required, and its JSON pointer in the root."""

    name: str
    schema: Any
    required: bool
    pointer: str
    types: frozenset[str]
    may_be_string: bool


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _json_type(value: Any) -> str:
    if value is None:
        return TYPE_NULL
    if isinstance(value, bool):
        return TYPE_BOOLEAN
    if isinstance(value, int):
        return TYPE_INTEGER
    if isinstance(value, float):
        return TYPE_NUMBER
    if isinstance(value, str):
        return TYPE_STRING
    if isinstance(value, list):
        return TYPE_ARRAY
    return TYPE_OBJECT


def _resolve(root: Any, ref: str) -> Any:
    target = root
    for token in ref[2:].split("/") if ref != "#/" else [""]:
        sel = token.replace("~1", "/").replace("~0", "~")
        if isinstance(target, Mapping) and sel in target:
            target = target[sel]
        elif isinstance(target, list) and sel.isdigit() and int(sel) < len(target):
            target = target[int(sel)]
        else:
            raise SchemaError(f"cannot resolve $ref {ref}, {sel} not found", ref)
    return target


def _has_properties(schema: Mapping[str, Any]) -> bool:
    return "properties" in schema or ("additionalProperties" in schema and schema["additionalProperties"] is not True)


def kind_of(schema: Any, path: str) -> str:
    """The node kind `common_chat_schema_from_json` builds for `schema` (type names for typed leaves)."""
    if not isinstance(schema, Mapping):
        raise SchemaError("schema must be an object", path)
    if "$ref" in schema:
        return "ref"
    if "oneOf" in schema or "anyOf" in schema:
        return "any_of"
    type_ = schema.get("type")
    if isinstance(type_, list):
        return "type_list"
    if "const" in schema:
        return "const"
    if "enum" in schema:
        return "enum"
    if type_ is not None and not isinstance(type_, str):
        raise SchemaError("type must be a string or an array of strings", path)
    if not type_:
        if _has_properties(schema):
            return TYPE_OBJECT
        if "allOf" in schema:
            return "all_of"
        if "items" in schema or "prefixItems" in schema:
            return TYPE_ARRAY
        if any(k in schema for k in ("pattern", "minLength", "maxLength")) or _is_format(schema.get("format")):
            return TYPE_STRING
        return "any"
    if type_ in (TYPE_OBJECT, TYPE_STRING) and "allOf" in schema and not (type_ == TYPE_OBJECT
                                                                        and _has_properties(schema)):
        return "all_of"
    if type_ in ALL_TYPES:
        return str(type_)
    raise SchemaError(f"unrecognized type {type_}", path)


def _is_format(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    return value in ("date", "time", "date-time", "uuid") or (len(value) == 5 and value.startswith("uuid")
                                                               and value[4] in "12345")


def value_types(schema: Any, root: Any, path: str = "#", visiting: frozenset[str] = frozenset()) -> frozenset[str]:
    """The JSON types a value matching `schema` may have (`common_chat_schema::value_types`)."""
    kind = kind_of(schema, path)
    if kind == "any":
        return ALL_TYPES
    if kind == TYPE_NUMBER:
        return frozenset({TYPE_NUMBER, TYPE_INTEGER})
    if kind in ALL_TYPES:
        return frozenset({kind})
    if kind == "const":
        return frozenset({_json_type(schema["const"])})
    if kind == "enum":
        values = schema["enum"]
        if not isinstance(values, list) or not values:
            raise SchemaError("enum must be a non-empty array", path)
        return frozenset(_json_type(v) for v in values)
    if kind == "ref":
        ref = schema["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#/"):
            raise SchemaError(f"unsupported $ref {ref}", path)
        if ref in visiting:
            return frozenset()  # a cycle adds no type
        return value_types(_resolve(root, ref), root, ref, visiting | {ref})
    if kind == "type_list":
        out: frozenset[str] = frozenset()
        for t in schema["type"]:
            out |= value_types(dict(schema, type=t), root, path + "/type", visiting)
        return out
    key = "oneOf" if "oneOf" in schema else "anyOf" if kind == "any_of" else "allOf"
    alts = schema[key]
    if not isinstance(alts, list) or not alts:
        raise SchemaError("must be a non-empty array of schemas", f"{path}/{key}")
    if kind == "any_of":
        out = frozenset()
        for alt in alts:
            out |= value_types(alt, root, f"{path}/{key}", visiting)
        return out
    out = ALL_TYPES
    for alt in alts:
        out &= value_types(alt, root, f"{path}/{key}", visiting)
    return out


def may_be_string(schema: Any, root: Any, path: str = "#", visiting: frozenset[str] = frozenset()) -> bool:
    """Whether some branch of `schema` admits a string (`common_chat_schema::may_be_string`); an unconstrained
    schema does not count."""
    kind = kind_of(schema, path)
    if kind == TYPE_STRING:
        return True
    if kind == "const":
        return isinstance(schema["const"], str)
    if kind == "enum":
        values = schema["enum"]
        return isinstance(values, list) and any(isinstance(v, str) for v in values)
    if kind == "ref":
        ref = schema["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#/") or ref in visiting:
            return False
        return may_be_string(_resolve(root, ref), root, ref, visiting | {ref})
    if kind == "type_list":
        return any(may_be_string(dict(schema, type=t), root, path + "/type", visiting) for t in schema["type"])
    if kind == "any_of":
        key = "oneOf" if "oneOf" in schema else "anyOf"
        return any(may_be_string(alt, root, f"{path}/{key}", visiting) for alt in schema[key])
    if kind == "all_of":
        any_string = False
        for alt in schema["allOf"]:
            if kind_of(alt, f"{path}/allOf") == "any":
                continue
            if not may_be_string(alt, root, f"{path}/allOf", visiting):
                return False
            any_string = True
        return any_string
    return False


def parameters(function: Mapping[str, Any]) -> tuple[Any, list[Parameter]]:
    """(parameters schema, its properties in schema order) — none unless the root is an object schema."""
    params = tool_parameters(function)
    if kind_of(params, "#") != TYPE_OBJECT:
        return params, []
    props = params.get("properties")
    if props is None:
        return params, []
    if not isinstance(props, Mapping):
        raise SchemaError("properties must be an object", "#")
    required = {r for r in params.get("required") or [] if isinstance(r, str)} \
        if isinstance(params.get("required"), list) else set()
    out = []
    for name, prop in props.items():
        pointer = "/properties/" + _escape(name)
        out.append(Parameter(name, prop, name in required, pointer, value_types(prop, params, "#" + pointer),
                             may_be_string(prop, params, "#" + pointer)))
    return params, out
