"""The tools of a request as the chat formats read them: each function, and the parameters of its schema.

Two upstream walks over an OpenAI `tools` list: `foreach_function` (parsers/parsers.cpp) takes entries with
`"type": "function"` and a `function` object; the builder helpers of chat-peg-parser.cpp take any entry with a
`function` object. Parameters come from the compiled schema model (gbnf/schema.py, `foreach_parameter`): the
properties of an object schema, in schema order, each with the JSON types a value may take.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from autoparser.errors import GrammarError
from autoparser.gbnf.schema import SchemaNode, compile_schema, unescape_token
from autoparser.types import tool_parameters

__all__ = ["Function", "Parameter", "branches", "functions", "parameters"]


@dataclass(frozen=True)
class Function:
    """One function tool: its name, its parameters schema (`common_chat_tool_parameters`) and its definition."""

    name: str
    schema: Any
    definition: Mapping[str, Any]


@dataclass(frozen=True)
class Parameter:
    """One property of a tool's parameters: its schema, whether required, its JSON pointer in the parameters
    document and its compiled node (which answers `value_types()` and `may_be_string()`)."""

    name: str
    schema: Any
    required: bool
    pointer: str
    node: SchemaNode

    @property
    def types(self) -> frozenset[str]:
        """The JSON types a value may take (`common_chat_schema::value_types`)."""
        return self.node.value_types()

    @property
    def may_be_string(self) -> bool:
        """Whether some branch admits a string; an unconstrained schema does not count."""
        return self.node.may_be_string()

    @property
    def enumerated_strings(self) -> frozenset[str] | None:
        """The strings the parameter admits where it admits other values too and only finitely many strings
        (`{"enum": ["7", 8]}`: "7"), else None: a text its template writes raw is then either one of them or
        the JSON of another value."""
        if not self.may_be_string or self.types <= {"string"}:
            return None
        return self.node.finite_strings()


def functions(tools: Iterable[Any] | None, *, typed: bool = True) -> list[Function]:
    """The function tools of `tools`, in order. `typed`: only `"type": "function"` entries (`foreach_function`);
    otherwise any entry with a `function` object (the chat-peg-parser.cpp helpers). A function without a name
    is an error."""
    out: list[Function] = []
    for tool in tools or ():
        if not isinstance(tool, Mapping) or "function" not in tool or (typed and tool.get("type") != "function"):
            continue
        fn = tool["function"]
        name = fn.get("name") if isinstance(fn, Mapping) else None
        if not isinstance(name, str):
            raise GrammarError(f"tool definition without a function name: {tool!r}")
        out.append(Function(name, tool_parameters(fn), fn))
    return out


def parameters(function: Function) -> list[Parameter]:
    """The properties of the function's parameters, in schema order (`foreach_parameter`); none unless the
    parameters are an object schema. The schema is compiled, so an unsupported one raises SchemaError."""
    doc = compile_schema(function.schema)
    if doc.root.kind != "object":
        return []
    raw = function.schema.get("properties", {}) if isinstance(function.schema, Mapping) else {}
    out = []
    for name, node, required in doc.root.properties:
        pointer = "/properties/" + name.replace("~", "~0").replace("/", "~1")
        out.append(Parameter(name, raw.get(name) if isinstance(raw, Mapping) else None, required, pointer, node))
    return out


_DEFS = ("$defs", "definitions")


def branches(function: Function) -> list[Function]:
    """The object schemas a function's parameters are one of, where they are a union at the root (`anyOf` or
    `oneOf` of object schemas, each maybe a `$ref` or an `allOf`; a root `$ref` or `allOf` is one branch), each
    as a function of its own with the document's definitions; [] where the parameters are an object schema
    themselves, or no such union. (`foreach_parameter` finds no parameters there: llama.cpp reads no argument.)"""
    root = function.schema
    if not isinstance(root, Mapping) or "properties" in root:
        return []
    defs = {k: root[k] for k in _DEFS if isinstance(root.get(k), Mapping)}

    def resolved(schema: Any, depth: int = 0) -> Mapping[str, Any] | None:
        """`schema` as one object schema (its `$ref` followed, its `allOf` members' properties joined)."""
        if depth > 8 or not isinstance(schema, Mapping):
            return None
        ref = schema.get("$ref")
        if isinstance(ref, str):
            if not ref.startswith("#/"):
                return None  # (only references into the document, as compile_schema reads them)
            target: Any = root
            for token in ref[2:].split("/"):
                key = unescape_token(token)
                target = target.get(key) if isinstance(target, Mapping) else None
            return resolved(target, depth + 1)
        if isinstance(schema.get("allOf"), list):
            properties: dict[str, Any] = {}
            required: list[str] = []
            for member in schema["allOf"]:
                part = resolved(member, depth + 1)
                if part is None:
                    return None
                properties.update(part.get("properties") or {})
                required += [r for r in part.get("required") or [] if r not in required]
            return {"type": "object", "properties": properties, "required": required}
        if isinstance(schema.get("properties"), Mapping) or schema.get("type") == "object":
            return schema
        if set(schema) <= {"required", "description", "title"}:  # (an `allOf` member that only requires)
            return {"properties": {}, "required": schema.get("required") or []}
        return None

    union = root.get("anyOf", root.get("oneOf"))
    members = union if isinstance(union, list) else [root] if ("$ref" in root or "allOf" in root) else []
    out = []
    for member in members:
        branch = resolved(member)
        if branch is None or not isinstance(branch.get("properties", {}), Mapping):
            return []
        out.append(Function(function.name, {**branch, **defs}, function.definition))
    return out
