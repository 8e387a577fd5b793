"""Small pieces several handlers share (`foreach_function`, the request predicates, the grammar driver)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from autoparser.chat.request import Continuation
from autoparser.types import tool_parameters

if TYPE_CHECKING:
    from autoparser.chat.generator import GenerationInputs
    from autoparser.peg.arena import Arena


def functions(tools: Any) -> list[tuple[str, Any]]:
    """(name, parameters schema) of each `{"type": "function", "function": {...}}` tool (`foreach_function`)."""
    out: list[tuple[str, Any]] = []
    for tool in tools or ():
        if not isinstance(tool, Mapping) or tool.get("type") != "function" or "function" not in tool:
            continue
        fn = tool["function"]
        if not isinstance(fn, Mapping):
            continue
        out.append((str(fn.get("name", "")), tool_parameters(fn)))
    return out


def function_defs(tools: Any) -> list[Mapping[str, Any]]:
    """The `function` objects themselves, for handlers that read more than name and parameters."""
    return [t["function"] for t in tools or () if isinstance(t, Mapping) and t.get("type") == "function"
            and isinstance(t.get("function"), Mapping)]


def has_tools(inputs: GenerationInputs) -> bool:
    return isinstance(inputs.tools, list) and bool(inputs.tools)


def has_response_format(inputs: GenerationInputs) -> bool:
    """A json_schema object was given (the C++ tests `is_object()`, so `{}` counts too)."""
    return isinstance(inputs.json_schema, dict)


def has_continuation(inputs: GenerationInputs) -> bool:
    """`generation_params::has_continuation`: continuing, and there is a message to continue."""
    return inputs.continuation != Continuation.NONE and bool(inputs.continue_msg)


def to_grammar(arena: Arena, lazy: bool) -> str:
    """`build_grammar([&](builder) { parser.build_grammar(builder, lazy); })`."""
    from autoparser.gbnf.from_peg import arena_to_gbnf

    return arena_to_gbnf(arena, lazy=lazy)


def _escape_pointer_token(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _compiles_to_object(schema: Any) -> bool:
    """Whether `common_chat_schema_from_json` makes an OBJECT of this (SPEC 2.5 build rules 1-8)."""
    if not isinstance(schema, Mapping):
        return False
    if "$ref" in schema or "oneOf" in schema or "anyOf" in schema or isinstance(schema.get("type"), list) \
            or "const" in schema or "enum" in schema:
        return False
    has_props = "properties" in schema or ("additionalProperties" in schema
                                           and schema["additionalProperties"] is not True)
    kind = schema.get("type")
    if kind is None:
        return has_props
    return kind == "object" and (has_props or "allOf" not in schema)


def _compile(schema: Any) -> Any:
    from autoparser.gbnf.from_schema import compile_schema

    return compile_schema(schema)


def parameters(function: Mapping[str, Any]) -> list[tuple[str, str, bool]]:
    """`foreach_parameter`: (name, JSON pointer, may be a string) of each property of an object parameters schema,
    in schema order; nothing when the parameters do not compile to an object. Invalid schemas raise, as in the
    C++, which compiles the document before looking at it."""
    params = tool_parameters(function)
    doc = _compile(params)
    if not _compiles_to_object(params):
        return []
    props = params.get("properties")
    if not isinstance(props, Mapping):
        return []
    out = []
    for name in props:
        pointer = "/properties/" + _escape_pointer_token(str(name))
        out.append((str(name), pointer, bool(doc.resolve_pointer(pointer).may_be_string())))
    return out
