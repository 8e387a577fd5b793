"""Small pieces several handlers share (`foreach_function`, the request predicates, the grammar driver)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from autoparser.errors import GrammarError
from autoparser.types import tool_parameters

if TYPE_CHECKING:
    from autoparser.chat.generator import GenerationInputs
    from autoparser.peg.arena import Arena
    from autoparser.peg.builder import P


def functions(tools: Any) -> list[tuple[str, Any]]:
    """(name, parameters schema) of each `{"type": "function", "function": {...}}` tool (`foreach_function`)."""
    out: list[tuple[str, Any]] = []
    for tool in tools or ():
        if not isinstance(tool, Mapping) or tool.get("type") != "function" or "function" not in tool:
            continue
        fn = tool["function"]
        name = fn.get("name") if isinstance(fn, Mapping) else None
        if not isinstance(name, str):
            raise GrammarError(f"tool definition without a function name: {tool!r}")
        out.append((name, tool_parameters(fn)))
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
    """`generation_params::has_continuation` (see GenerationInputs.has_continuation)."""
    return inputs.has_continuation


def to_grammar(arena: Arena, lazy: bool) -> str:
    """`build_grammar([&](builder) { parser.build_grammar(builder, lazy); })`."""
    from autoparser.gbnf.from_peg import arena_to_gbnf

    return arena_to_gbnf(arena, lazy=lazy)



def cpp_sum(*operands: Callable[[], P]) -> P:
    """`a + b + c ...` with its operands created right to left, as the compiled C++ evaluates such a chain.

    GBNF automaton rules (`until-<id>`, `ac-<id>`) are named after node ids, so for the grammar text to equal the
    C++'s, nodes must be created in the C++ order: the operands last to first, then the sequences left to right.
    """
    made = [make() for make in reversed(operands)]
    made.reverse()
    result = made[0]
    for part in made[1:]:
        result = result + part
    return result
