"""JSON Schema -> GBNF, as llama.cpp's `json_schema_to_grammar` writes it, and the grammar driver
`build_grammar` the PEG emitter runs on.

Two stages, as in the C++: the schema is first compiled into a typed document (`compile_schema`, port of
`common_chat_schema_from_json`: unsupported input raises SchemaError with the JSON path of the node), then the
converter (port of `common_chat_schema_converter`) visits the document and fills a rule table. Rule names,
the order alternatives are written in and every piece of spacing follow the C++, because grammars are compared
with it as text. Unsupported regex patterns degrade to `string` with a warning (kept in `warnings`, never
raised); invalid ones are errors.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

from autoparser.errors import SchemaError
from autoparser.gbnf.model import format_rules, gbnf_format_literal
from autoparser.peg.trie import Trie

__all__ = [
    "GrammarBuilder",
    "SchemaDocument",
    "SchemaNode",
    "build_grammar",
    "compile_schema",
    "json_schema_to_grammar",
]

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


def _dump(value: Any) -> str:
    """nlohmann-style compact dump (key order kept, UTF-8 raw)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return (isinstance(v, (int, float))) and not isinstance(v, bool)


# --- the schema document --------------------------------------------------------------------------------------

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
        t = s.target()
        if t is None or id(t) in visited:
            return frozenset()
        visited.add(id(t))
        out = _value_types(t, visited)
        visited.discard(id(t))
        return out
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
        t = s.target()
        if t is None or id(t) in visited:
            return False
        visited.add(id(t))
        out = _may_be_string(t, visited)
        visited.discard(id(t))
        return out
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


class SchemaDocument:
    """A compiled schema: its root node, the $ref targets, and nodes addressable by JSON pointer."""

    def __init__(self) -> None:
        self.root: SchemaNode = SchemaNode("any")
        self.refs: dict[str, SchemaNode] = {}
        self.pointers: dict[str, SchemaNode] = {}

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
        for sel in tokens[1:]:
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
        return n

    def build_string(self, schema: dict[str, Any], path: str, pointer: str | None) -> SchemaNode:
        n = self.node("string", pointer)
        if "pattern" in schema:
            if not isinstance(schema["pattern"], str):
                raise self.fail(path, "pattern must be a string")
            n.pattern = schema["pattern"]
        n.format = self.get_format(schema, path)
        n.min_length = self.get_count(schema, "minLength", path, 0)
        n.max_length = self.get_count(schema, "maxLength", path, -1)
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
        return n

    def build(self, schema: Any, path: str, pointer: str | None) -> SchemaNode:
        if not isinstance(schema, dict):
            raise self.fail(path, "schema must be an object")
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


# --- GBNF building blocks -------------------------------------------------------------------------------------

SPACE_RULE = '| " " | "\\n"{1,2} [ \\t]{0,20}'

PRIMITIVE_RULES: dict[str, tuple[str, tuple[str, ...]]] = {
    "boolean": ('("true" | "false")', ()),
    "decimal-part": ("[0-9]{1,16}", ()),
    "integral-part": ("[0] | [1-9] [0-9]{0,15}", ()),
    "number": ('("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)?',
               ("integral-part", "decimal-part")),
    "integer": ('("-"? integral-part)', ("integral-part",)),
    "value": ("object | array | string | number | boolean | null",
              ("object", "array", "string", "number", "boolean", "null")),
    "object": ('"{" space ( string ":" space value ("," space string ":" space value)* )? space "}"',
               ("string", "value")),
    "array": ('"[" space ( value ("," space value)* )? space "]"', ("value",)),
    "uuid": ('"\\"" [0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" '
             '[0-9a-fA-F]{12} "\\""', ()),
    "char": ('[^"\\\\\\x7F\\x00-\\x1F] | [\\\\] (["\\\\bfnrt] | "u" [0-9a-fA-F]{4})', ()),
    "string": ('"\\"" char* "\\""', ("char",)),
    "null": ('"null"', ()),
}

STRING_FORMAT_RULES: dict[str, tuple[str, tuple[str, ...]]] = {
    "date": ('[0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [1-2] [0-9] | "3" [0-1] )', ()),
    "time": ('([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{3} )? ( "Z" | ( "+" | "-" ) '
             '( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )', ()),
    "date-time": ('date "T" time', ("date", "time")),
    "date-string": ('"\\"" date "\\""', ("date",)),
    "time-string": ('"\\"" time "\\""', ("time",)),
    "date-time-string": ('"\\"" date-time "\\""', ("date-time",)),
}

RESERVED_NAMES = frozenset({"root", *PRIMITIVE_RULES, *STRING_FORMAT_RULES})

_INVALID_RULE_CHARS = re.compile(r"[^a-zA-Z0-9-]+")
_NON_LITERAL = frozenset("|.()[]{}*+?^$")
_ESCAPED_IN_REGEXPS_BUT_NOT_IN_LITERALS = frozenset("^$.[]()|{}*+?")
MAX_PATTERN_DEPTH = 100


def build_repetition(item: str, min_items: int, max_items: int, separator: str = "") -> str:
    has_max = max_items != INT_MAX
    if max_items == 0:
        return ""
    if min_items == 0 and max_items == 1:
        return item + "?"
    if not separator:
        if min_items == 1 and not has_max:
            return item + "+"
        if min_items == 0 and not has_max:
            return item + "*"
        return f"{item}{{{min_items},{max_items if has_max else ''}}}"
    result = item + " " + build_repetition(f"({separator} {item})", 0 if min_items == 0 else min_items - 1,
                                           max_items - 1 if has_max else max_items)
    if min_items == 0:
        result = f"({result})?"
    return result


def build_min_max_int(min_value: int, max_value: int, out: list[str], decimals_left: int = 16,
                      top_level: bool = True) -> None:
    """Integer range as GBNF digits (transliterated from the C++ recursion; 16-digit budget)."""
    has_min = min_value != INT64_MIN
    has_max = max_value != INT64_MAX

    def digit_range(lo: str, hi: str) -> None:
        out.append("[")
        out.append(lo if lo == hi else f"{lo}-{hi}")
        out.append("]")

    def more_digits(min_digits: int, max_digits: int) -> None:
        out.append("[0-9]")
        if min_digits == max_digits == 1:
            return
        out.append("{")
        out.append(str(min_digits))
        if max_digits != min_digits:
            out.append(",")
            if max_digits != INT_MAX:
                out.append(str(max_digits))
        out.append("}")

    def uniform_range(frm: str, to: str) -> None:
        i = 0
        while i < len(frm) and i < len(to) and frm[i] == to[i]:
            i += 1
        if i > 0:
            out.append(f'"{frm[:i]}"')
        if i < len(frm) and i < len(to):
            if i > 0:
                out.append(" ")
            sub_len = len(frm) - i - 1
            if sub_len > 0:
                from_sub, to_sub = frm[i + 1:], to[i + 1:]
                zeros, nines = "0" * sub_len, "9" * sub_len
                to_reached = False
                out.append("(")
                if from_sub == zeros:
                    digit_range(frm[i], chr(ord(to[i]) - 1))
                    out.append(" ")
                    more_digits(sub_len, sub_len)
                else:
                    out.append(f"[{frm[i]}] ")
                    out.append("(")
                    uniform_range(from_sub, nines)
                    out.append(")")
                    if ord(frm[i]) < ord(to[i]) - 1:
                        out.append(" | ")
                        if to_sub == nines:
                            digit_range(chr(ord(frm[i]) + 1), to[i])
                            to_reached = True
                        else:
                            digit_range(chr(ord(frm[i]) + 1), chr(ord(to[i]) - 1))
                        out.append(" ")
                        more_digits(sub_len, sub_len)
                if not to_reached:
                    out.append(" | ")
                    digit_range(to[i], to[i])
                    out.append(" ")
                    uniform_range(zeros, to_sub)
                out.append(")")
            else:
                out.append(f"[{frm[i]}-{to[i]}]")

    if has_min and has_max:
        if min_value < 0 and max_value < 0:
            out.append('"-" (')
            build_min_max_int(-max_value, -min_value, out, decimals_left, True)
            out.append(")")
            return
        if min_value < 0:
            out.append('"-" (')
            build_min_max_int(0, -min_value, out, decimals_left, True)
            out.append(") | ")
            min_value = 0
        min_s, max_s = str(min_value), str(max_value)
        for digits in range(len(min_s), len(max_s)):
            uniform_range(min_s, "9" * digits)
            min_s = "1" + "0" * digits
            out.append(" | ")
        uniform_range(min_s, max_s)
        return
    less_decimals = max(decimals_left - 1, 1)
    if has_min:
        if min_value < 0:
            out.append('"-" (')
            build_min_max_int(INT64_MIN, -min_value, out, decimals_left, False)
            out.append(") | [0] | [1-9] ")
            more_digits(0, decimals_left - 1)
        elif min_value == 0:
            if top_level:
                out.append("[0] | [1-9] ")
                more_digits(0, less_decimals)
            else:
                more_digits(1, decimals_left)
        elif min_value <= 9:
            c = str(min_value)
            range_start = "1" if top_level else "0"
            if c > range_start:
                digit_range(range_start, chr(ord(c) - 1))
                out.append(" ")
                more_digits(1, less_decimals)
                out.append(" | ")
            digit_range(c, "9")
            out.append(" ")
            more_digits(0, less_decimals)
        else:
            min_s = str(min_value)
            length = len(min_s)
            c = min_s[0]
            if c > "1":
                digit_range("1" if top_level else "0", chr(ord(c) - 1))
                out.append(" ")
                more_digits(length, less_decimals)
                out.append(" | ")
            digit_range(c, c)
            out.append(" (")
            build_min_max_int(int(min_s[1:]), INT64_MAX, out, less_decimals, False)
            out.append(")")
            if c < "9":
                out.append(" | ")
                digit_range(chr(ord(c) + 1), "9")
                out.append(" ")
                more_digits(length - 1, less_decimals)
        return
    if has_max:
        if max_value >= 0:
            if top_level:
                out.append('"-" [1-9] ')
                more_digits(0, less_decimals)
                out.append(" | ")
            build_min_max_int(0, max_value, out, decimals_left, True)
        else:
            out.append('"-" (')
            build_min_max_int(-max_value, INT64_MAX, out, decimals_left, False)
            out.append(")")
        return
    raise SchemaError("At least one of min_value or max_value must be set")


def _gbnf_escape_length(pattern: str, pos: int) -> int:
    if pos + 1 >= len(pattern) or pattern[pos] != "\\":
        return 0
    e = pattern[pos + 1]
    if e in 'trn\\"[]-':
        return 2
    n_hex = {"x": 2, "u": 4, "U": 8}.get(e)
    if n_hex is None or pos + 2 + n_hex > len(pattern):
        return 0
    if not all(h in "0123456789abcdefABCDEF" for h in pattern[pos + 2:pos + 2 + n_hex]):
        return 0
    return 2 + n_hex


class _Unsupported(Exception):
    pass


class _Invalid(Exception):
    pass


class SchemaConverter:
    """The rule table and the visitor (`common_chat_schema_converter`)."""

    def __init__(self, dotall: bool = False) -> None:
        self.dotall = dotall
        self.rules: dict[str, str] = {"space": SPACE_RULE}
        self.refs_being_resolved: set[str] = set()
        self.errors: list[str] = []
        self.warnings: list[str] = []

    def add_rule(self, name: str, rule: str) -> str:
        esc = _INVALID_RULE_CHARS.sub("-", name)
        if esc not in self.rules or self.rules[esc] == rule:
            self.rules[esc] = rule
            return esc
        i = 0
        while f"{esc}{i}" in self.rules and self.rules[f"{esc}{i}"] != rule:
            i += 1
        key = f"{esc}{i}"
        self.rules[key] = rule
        return key

    def add_primitive(self, name: str, rule: tuple[str, tuple[str, ...]]) -> str:
        n = self.add_rule(name, rule[0])
        for dep in rule[1]:
            dep_rule = PRIMITIVE_RULES.get(dep) or STRING_FORMAT_RULES.get(dep)
            if dep_rule is None:
                self.errors.append(f"Rule {dep} not known")
                continue
            if dep not in self.rules:
                self.add_primitive(dep, dep_rule)
        return n

    # -- patterns

    def visit_pattern(self, pattern: str, name: str) -> str:
        snapshot = dict(self.rules)
        try:
            return self.pattern_to_rule(pattern, name)
        except _Unsupported as err:
            self.rules = snapshot
            self.warnings.append(f"pattern {pattern} is not supported ({err}), accepting any string")
            return self.add_rule(name, self.add_primitive("string", PRIMITIVE_RULES["string"]))
        except _Invalid as err:
            self.rules = snapshot
            self.errors.append(f"Invalid pattern {pattern}: {err}")
            return ""

    def pattern_to_rule(self, pattern: str, name: str) -> str:
        if len(pattern) < 2 or pattern[0] != "^" or pattern[-1] != "$":
            raise _Unsupported("not anchored with '^' and '$'")
        sub = pattern[1:-1]
        sub_rule_ids: dict[str, str] = {}
        length = len(sub)
        state = {"i": 0, "depth": 0}

        def to_rule(item: tuple[str, bool]) -> str:
            return f'"{item[0]}"' if item[1] else item[0]

        def get_dot() -> str:
            return self.add_rule("dot", "[\\U00000000-\\U0010FFFF]" if self.dotall else "[^\\x0A\\x0D]")

        def transform() -> tuple[str, bool]:
            seq: list[tuple[str, bool]] = []

            def join_seq() -> tuple[str, bool]:
                ret: list[tuple[str, bool]] = []
                literal = ""
                for text, is_lit in seq:
                    if is_lit:
                        literal += text
                    else:
                        if literal:
                            ret.append((literal, True))
                            literal = ""
                        ret.append((text, False))
                if literal:
                    ret.append((literal, True))
                return " ".join(to_rule(x) for x in ret), False

            while state["i"] < length:
                i = state["i"]
                c = sub[i]
                if c == ".":
                    seq.append((get_dot(), False))
                    state["i"] += 1
                elif c == "(":
                    state["i"] += 1
                    i = state["i"]
                    if i < length and sub[i] == "?":
                        if i + 1 < length and sub[i + 1] == ":":
                            state["i"] += 2
                        else:
                            raise _Unsupported("unsupported group syntax")
                    state["depth"] += 1
                    if state["depth"] > MAX_PATTERN_DEPTH:
                        raise _Unsupported("pattern nesting too deep")
                    seq.append((f"({to_rule(transform())})", False))
                elif c == ")":
                    state["i"] += 1
                    if state["depth"] == 0:
                        raise _Invalid("unbalanced parentheses")
                    state["depth"] -= 1
                    return join_seq()
                elif c in "^$":
                    raise _Unsupported("anchor inside the pattern")
                elif c == "[":
                    sq = c
                    i += 1
                    while i < length and sub[i] != "]":
                        if sub[i] == "\\":
                            el = _gbnf_escape_length(sub, i)
                            if el == 0:
                                raise _Unsupported(f"unsupported escape in character class: {sub[i:i + 2]}")
                            sq += sub[i:i + el]
                            i += el
                        else:
                            sq += sub[i]
                            i += 1
                    if i >= length:
                        raise _Invalid("unterminated character class")
                    sq += "]"
                    state["i"] = i + 1
                    seq.append((sq, False))
                elif c == "|":
                    seq.append(("|", False))
                    state["i"] += 1
                elif c in "*+?":
                    if not seq:
                        raise _Invalid("nothing to repeat")
                    seq[-1] = (to_rule(seq[-1]) + c, False)
                    state["i"] += 1
                elif c == "{":
                    curly = c
                    i += 1
                    while i < length and sub[i] != "}":
                        curly += sub[i]
                        i += 1
                    if i >= length:
                        raise _Unsupported("unterminated curly brackets")
                    curly += "}"
                    state["i"] = i + 1
                    nums = curly[1:-1].split(",")
                    min_times, max_times = 0, INT_MAX
                    if len(nums) not in (1, 2):
                        raise _Unsupported("wrong number of values in curly brackets")
                    try:
                        if len(nums) == 1:
                            min_times = max_times = _stoi(nums[0])
                        else:
                            if nums[0]:
                                min_times = _stoi(nums[0])
                            if nums[1]:
                                max_times = _stoi(nums[1])
                    except ValueError:
                        raise _Unsupported("invalid number in curly brackets") from None
                    if not seq:
                        raise _Invalid("nothing to repeat")
                    text, is_lit = seq[-1]
                    if not is_lit:
                        sub_id = sub_rule_ids.get(text)
                        if sub_id is None:
                            sub_id = self.add_rule(f"{name}-{len(sub_rule_ids) + 1}", text)
                            sub_rule_ids[text] = sub_id
                        text = sub_id
                    seq[-1] = (build_repetition(f'"{text}"' if is_lit else text, min_times, max_times, ""), False)
                else:
                    literal = ""
                    while i < length:
                        ch = sub[i]
                        if ch == "\\":
                            if i == length - 1:
                                raise _Invalid("trailing backslash")
                            nxt = sub[i + 1]
                            if nxt in _ESCAPED_IN_REGEXPS_BUT_NOT_IN_LITERALS:
                                literal += nxt
                                i += 2
                            else:
                                el = _gbnf_escape_length(sub, i)
                                if el == 0:
                                    raise _Unsupported(f"unsupported escape: {sub[i:i + 2]}")
                                literal += sub[i:i + el]
                                i += el
                        elif ch == '"':
                            literal += '\\"'
                            i += 1
                        elif ch not in _NON_LITERAL and (i == length - 1 or not literal or sub[i + 1] == "."
                                                         or sub[i + 1] not in _NON_LITERAL):
                            literal += ch
                            i += 1
                        else:
                            break
                    state["i"] = i
                    if not literal:
                        raise _Unsupported(f"unsupported character: {c}")
                    seq.append((literal, True))
            return join_seq()

        rule = to_rule(transform())
        if state["depth"] != 0:
            raise _Invalid("unbalanced parentheses")
        return self.add_rule(name, f'"\\"" ({rule}) "\\""')

    # -- objects

    def not_strings(self, strings: list[str]) -> str:
        trie = Trie(strings)
        char_rule = self.add_primitive("char", PRIMITIVE_RULES["char"])
        out: list[str] = ['["] ( ']

        def visit(idx: int) -> None:
            node = trie.nodes[idx]
            rejects = ""
            first = True
            for cp in sorted(node.children):
                child = node.children[cp]
                c = chr(cp)
                rejects += c
                if not first:
                    out.append(" | ")
                first = False
                out.append(f"[{c}]")
                if trie.nodes[child].children:
                    out.append(" (")
                    visit(child)
                    out.append(")")
                else:
                    out.append(f" {char_rule}+")
            if node.children:
                out.append(f' | [^"{rejects}] {char_rule}*')

        visit(0)
        out.append(" )")
        if trie.nodes[0].pattern < 0:
            out.append("?")
        out.append(' ["]')
        return "".join(out)

    def resolve_ref(self, schema: SchemaNode) -> str:
        ref = schema.ref
        k = ref.find("#")
        fragment = ref[k + 1:] if k >= 0 else ref
        ref_name = "ref" + _INVALID_RULE_CHARS.sub("-", fragment)
        if ref_name not in self.rules and ref not in self.refs_being_resolved:
            target = schema.target()
            if target is None:
                self.errors.append(f"Unresolved $ref {ref}")
                return ""
            self.refs_being_resolved.add(ref)
            ref_name = self.visit(target, ref_name)
            self.refs_being_resolved.discard(ref)
        return ref_name

    def build_object_rule(self, properties: list[tuple[str, SchemaNode]], required: set[str], name: str,
                          additional: SchemaNode | None) -> str:
        required_props: list[str] = []
        optional_props: list[str] = []
        kv_names: dict[str, str] = {}
        prop_names: list[str] = []
        prefix = name + ("" if not name else "-")
        for prop_name, prop_schema in properties:
            prop_rule = self.visit(prop_schema, prefix + prop_name)
            kv_names[prop_name] = self.add_rule(
                f"{prefix}{prop_name}-kv", f'{gbnf_format_literal(_dump(prop_name))} space ":" space {prop_rule}')
            (required_props if prop_name in required else optional_props).append(prop_name)
            prop_names.append(prop_name)
        if additional is not None:
            sub_name = prefix + "additional"
            value_rule = (self.visit(additional, sub_name + "-value") if additional.kind != "any"
                          else self.add_primitive("value", PRIMITIVE_RULES["value"]))
            key_rule = (self.add_primitive("string", PRIMITIVE_RULES["string"]) if not prop_names
                        else self.add_rule(sub_name + "-k", self.not_strings(prop_names)))
            kv_names["*"] = self.add_rule(sub_name + "-kv", f'{key_rule} ":" space {value_rule}')
            optional_props.append("*")
        if not required_props and not optional_props:
            return '"{" space "}"'
        rule = '"{" space '
        rule += ' "," space '.join(kv_names[k] for k in required_props)
        if optional_props:
            rule += " ("
            if required_props:
                rule += ' "," space ( '

            def recursive_refs(ks: list[str], first_is_optional: bool) -> str:
                if not ks:
                    return ""
                k = ks[0]
                kv = kv_names[k]
                comma_ref = f'( "," space {kv} )'
                if first_is_optional:
                    res = comma_ref + ("*" if k == "*" else "?")
                else:
                    res = kv + (" " + comma_ref + "*" if k == "*" else "")
                if len(ks) > 1:
                    res += " " + self.add_rule(f"{prefix}{k}-rest", recursive_refs(ks[1:], True))
                return res

            rule += " | ".join(recursive_refs(optional_props[i:], False) for i in range(len(optional_props)))
            if required_props:
                rule += " )"
            rule += " )?"
        rule += ' space "}"'
        return rule

    # -- visiting

    def visit_primitive(self, rule_name: str, typ: str) -> str:
        return self.add_primitive("root" if rule_name == "root" else typ, PRIMITIVE_RULES[typ])

    def visit_all_of(self, schema: SchemaNode, name: str, rule_name: str) -> str:
        required: set[str] = set()
        properties: list[tuple[str, SchemaNode]] = []
        enum_values: dict[str, int] = {}

        def add_component(comp: SchemaNode, is_required: bool) -> None:
            if comp.kind == "ref":
                t = comp.target()
                if t is not None:
                    add_component(t, is_required)
            elif comp.kind == "object":
                for pname, pschema, _req in comp.properties:
                    properties.append((pname, pschema))
                    if is_required:
                        required.add(pname)
            elif comp.kind == "enum":
                for v in comp.values:
                    lit = gbnf_format_literal(_dump(v))
                    enum_values[lit] = enum_values.get(lit, 0) + 1

        for child in schema.children:
            if child.kind == "anyOf":
                for alt in child.children:
                    add_component(alt, False)
            else:
                add_component(child, True)
        if enum_values:
            inter = [lit for lit in sorted(enum_values, key=lambda s: s.encode("utf-8"))
                     if enum_values[lit] == len(schema.children)]
            if inter:
                return self.add_rule(rule_name, "(" + " | ".join(inter) + ")")
        return self.add_rule(rule_name, self.build_object_rule(properties, required, name, None))

    def visit(self, schema: SchemaNode, name: str) -> str:
        rule_name = name + "-" if name in RESERVED_NAMES else (name or "root")
        sub_name = name + ("-" if name else "")
        k = schema.kind
        if k == "ref":
            return self.add_rule(rule_name, self.resolve_ref(schema))
        if k == "anyOf":
            alts = [self.visit(c, f"{name}{'-' if name else 'alternative-'}{i}") for i, c in enumerate(schema.children)]
            return self.add_rule(rule_name, " | ".join(alts))
        if k == "allOf":
            return self.visit_all_of(schema, name, rule_name)
        if k == "const":
            return self.add_rule(rule_name, gbnf_format_literal(_dump(schema.value)))
        if k == "enum":
            return self.add_rule(rule_name, "(" + " | ".join(gbnf_format_literal(_dump(v)) for v in schema.values) + ")")
        if k == "object":
            if not schema.properties and schema.additional is not None and schema.additional.kind == "any":
                return self.add_rule(rule_name, self.add_primitive("object", PRIMITIVE_RULES["object"]))
            props = [(n, s) for n, s, _ in schema.properties]
            required = {n for n, _, r in schema.properties if r}
            return self.add_rule(rule_name, self.build_object_rule(props, required, name, schema.additional))
        if k == "tuple":
            parts = [self.visit(item, f"{sub_name}tuple-{i}") for i, item in enumerate(schema.items)]
            return self.add_rule(rule_name, '"[" space ' + ' "," space '.join(parts) + ' space "]"')
        if k == "array":
            if schema.items.kind == "any" and schema.min_items == 0 and schema.max_items < 0:
                return self.visit_primitive(rule_name, "array")
            item_rule = self.visit(schema.items, sub_name + "item")
            max_items = INT_MAX if schema.max_items < 0 else schema.max_items
            return self.add_rule(rule_name, '"[" space ' + build_repetition(item_rule, schema.min_items, max_items,
                                                                            '"," space') + ' space "]"')
        if k == "string":
            if schema.pattern:
                return self.visit_pattern(schema.pattern, rule_name)
            if schema.format == "uuid":
                return self.visit_primitive(rule_name, "uuid")
            if schema.format:
                prim = f"{schema.format}-string"
                return self.add_rule(rule_name, self.add_primitive(prim, STRING_FORMAT_RULES[prim]))
            if schema.min_length > 0 or schema.max_length >= 0:
                char_rule = self.add_primitive("char", PRIMITIVE_RULES["char"])
                max_len = INT_MAX if schema.max_length < 0 else schema.max_length
                return self.add_rule(rule_name, '"\\"" ' + build_repetition(char_rule, schema.min_length, max_len)
                                     + ' "\\""')
            return self.visit_primitive(rule_name, "string")
        if k == "integer":
            if schema.minimum == INT64_MIN and schema.maximum == INT64_MAX:
                return self.visit_primitive(rule_name, "integer")
            out: list[str] = ["("]
            build_min_max_int(schema.minimum, schema.maximum, out)
            out.append(")")
            return self.add_rule(rule_name, "".join(out))
        if k in ("number", "boolean", "null"):
            return self.visit_primitive(rule_name, k)
        return self.add_rule(rule_name, self.add_primitive("value", PRIMITIVE_RULES["value"]))

    def check_errors(self) -> None:
        if self.errors:
            raise SchemaError("JSON schema conversion failed:\n" + "\n".join(self.errors))

    def format_grammar(self) -> str:
        return format_rules(self.rules)


def _stoi(s: str) -> int:
    """`std::stoi`: leading whitespace, optional sign, digits; trailing junk ignored; none -> error."""
    m = re.match(r"\s*([+-]?\d+)", s)
    if not m:
        raise ValueError(s)
    return int(m.group(1))


def json_schema_to_grammar(schema: Any, *, force_gbnf: bool = False) -> str:
    """The GBNF grammar (text, rules sorted by name) of a JSON schema. Raises SchemaError."""
    del force_gbnf  # only meaningful for llguidance builds of the C++
    doc = compile_schema(schema)
    conv = SchemaConverter(False)
    try:
        conv.visit(doc.root, "")
    except RecursionError:
        raise SchemaError("schema nested too deeply to convert") from None
    conv.check_errors()
    return conv.format_grammar()


class GrammarBuilder:
    """What `build_grammar` hands its callback (the C++ `common_grammar_builder`)."""

    def __init__(self, converter: SchemaConverter) -> None:
        self._conv = converter

    def add_rule(self, name: str, rhs: str) -> str:
        return self._conv.add_rule(name, rhs)

    def add_schema(self, name: str, node: SchemaNode | Any) -> str:
        if not isinstance(node, SchemaNode):
            node = compile_schema(node).root
        return self._conv.visit(node, "" if name == "root" else name)


def build_grammar(callback: Callable[[GrammarBuilder], None], *, dotall: bool = False) -> str:
    """Run `callback` against a fresh rule table holding only `space`, then print every rule sorted by name."""
    conv = SchemaConverter(dotall)
    callback(GrammarBuilder(conv))
    conv.check_errors()
    return conv.format_grammar()
