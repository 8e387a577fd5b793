"""GBNF text helpers with llama.cpp's escaping rules, and the deterministic printer.

Grammars are compared with the C++ output as text, so literal escaping, character-class escaping and rule
order (by name, byte order, as the C++ `std::map` iterates) follow it exactly.
"""

from __future__ import annotations

from collections.abc import Mapping

_LITERAL_ESCAPES = {"\r": "\\r", "\n": "\\n", '"': '\\"', "\\": "\\\\"}


def gbnf_format_literal(s: str) -> str:
    """`"` + s with only CR, LF, `"` and `\\` escaped + `"` (tabs, control bytes and UTF-8 stay raw)."""
    return '"' + "".join(_LITERAL_ESCAPES.get(c, c) for c in s) + '"'


def escape_class_char(cp: int) -> str:
    """One code point inside `[...]` as the delimiter automata write it (`-`, `]`, `[`, `\\` escaped)."""
    c = chr(cp)
    if c in "-][\\":
        return "\\" + c
    if c == "\n":
        return "\\n"
    if c == "\t":
        return "\\t"
    if c == "\r":
        return "\\r"
    if 0x20 <= cp < 0x7F:
        return c
    if cp <= 0xFF:
        return f"\\x{cp:02X}"
    if cp <= 0xFFFF:
        return f"\\u{cp:04X}"
    return f"\\U{cp:08X}"


def format_rules(rules: Mapping[str, str]) -> str:
    """`name ::= rhs` lines, sorted by name in byte order (the C++ `std::map<std::string, ...>` order)."""
    return "".join(f"{name} ::= {rules[name]}\n" for name in sorted(rules, key=lambda n: n.encode("utf-8")))
