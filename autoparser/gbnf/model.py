"""GBNF text helpers with llama.cpp's escaping rules, and the deterministic printer.

Grammars are compared with the C++ output as text, so literal escaping and rule order (by name, byte order, as
the C++ `std::map` iterates) follow it exactly. Character-class escaping is from_peg.escape_char_class.
"""

from __future__ import annotations

from collections.abc import Mapping

_LITERAL_ESCAPES = {"\r": "\\r", "\n": "\\n", '"': '\\"', "\\": "\\\\"}


def gbnf_format_literal(s: str) -> str:
    """`"` + s with only CR, LF, `"` and `\\` escaped + `"` (tabs, control bytes and UTF-8 stay raw)."""
    return '"' + "".join(_LITERAL_ESCAPES.get(c, c) for c in s) + '"'


def format_rules(rules: Mapping[str, str]) -> str:
    """`name ::= rhs` lines, sorted by name in byte order (the C++ `std::map<std::string, ...>` order)."""
    return "".join(f"{name} ::= {rules[name]}\n" for name in sorted(rules, key=lambda n: n.encode("utf-8")))
