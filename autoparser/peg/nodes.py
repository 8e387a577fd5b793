"""PEG node kinds: one frozen dataclass per kind, stored in an arena and addressed by integer id.

The kinds and their fields mirror llama.cpp's `common_peg_*_parser` variant members, so that a serialised
arena uses the same field names as the C++ `save()` output. Children are arena ids, never nested objects:
ids are part of the observable behaviour (GBNF rule names `until-<id>` / `ac-<id>` embed them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, TypeAlias

ParserId: TypeAlias = int

# The C++ marks an unset root with SIZE_MAX; keep the same sentinel so saved arenas are interchangeable.
INVALID_ID: ParserId = 2**64 - 1

# C whitespace: what isspace() accepts in the "C" locale, so what `space()` (Space) matches and what llama.cpp's
# trims remove. The one spelling of the set for the package: Python's str.strip() and \s would also take
# Unicode spaces (U+00A0, U+3000, ...) that the C++ keeps.
C_SPACE = " \t\n\v\f\r"


@dataclass(frozen=True, slots=True)
class Epsilon:
    kind: ClassVar[str] = "epsilon"


@dataclass(frozen=True, slots=True)
class Start:
    kind: ClassVar[str] = "start"


@dataclass(frozen=True, slots=True)
class End:
    kind: ClassVar[str] = "end"


@dataclass(frozen=True, slots=True)
class Literal:
    literal: str
    kind: ClassVar[str] = "literal"


@dataclass(frozen=True, slots=True)
class Sequence:
    children: tuple[ParserId, ...]
    kind: ClassVar[str] = "sequence"


@dataclass(frozen=True, slots=True)
class Choice:
    children: tuple[ParserId, ...]
    kind: ClassVar[str] = "choice"


@dataclass(frozen=True, slots=True)
class Repetition:
    child: ParserId
    min_count: int
    max_count: int  # -1 means unbounded
    kind: ClassVar[str] = "repetition"


@dataclass(frozen=True, slots=True)
class And:
    """Positive lookahead (builder name `peek`)."""

    child: ParserId
    kind: ClassVar[str] = "and"


@dataclass(frozen=True, slots=True)
class Not:
    """Negative lookahead (builder name `negate`)."""

    child: ParserId
    kind: ClassVar[str] = "not"


@dataclass(frozen=True, slots=True)
class Any_:
    kind: ClassVar[str] = "any"


@dataclass(frozen=True, slots=True)
class Space:
    kind: ClassVar[str] = "space"


@dataclass(frozen=True, slots=True)
class CharRange:
    start: int
    end: int

    def contains(self, cp: int) -> bool:
        return self.start <= cp <= self.end


@dataclass(frozen=True, slots=True)
class Chars:
    pattern: str  # the class string as written; GBNF emission prints it verbatim
    ranges: tuple[CharRange, ...]
    negated: bool
    min_count: int
    max_count: int
    kind: ClassVar[str] = "chars"


@dataclass(frozen=True, slots=True)
class String:
    """String *content* up to an unescaped delimiter (the quotes themselves are separate literals)."""

    delimiter: str  # one character
    kind: ClassVar[str] = "string"


@dataclass(frozen=True, slots=True)
class Until:
    delimiters: tuple[str, ...]
    kind: ClassVar[str] = "until"


@dataclass(frozen=True, slots=True)
class Schema:
    """Parses as its child; for GBNF, emits the JSON-schema grammar of `schema` instead of the child.

    `schema` is the JSON value of the whole schema document and `pointer` (a JSON pointer, "" for the root)
    selects the sub-schema this node stands for. Unlike the C++, which drops the document on save(), we keep
    it in the serialised arena so a loaded parser still emits the same grammar.
    """

    child: ParserId
    name: str
    raw: bool
    schema: Any = None
    pointer: str = ""
    kind: ClassVar[str] = "schema"


@dataclass(frozen=True, slots=True)
class Rule:
    name: str
    child: ParserId
    trigger: bool
    kind: ClassVar[str] = "rule"


@dataclass(frozen=True, slots=True)
class Ref:
    name: str
    kind: ClassVar[str] = "ref"


@dataclass(frozen=True, slots=True)
class Atomic:
    child: ParserId
    kind: ClassVar[str] = "atomic"


@dataclass(frozen=True, slots=True)
class Tag:
    child: ParserId
    tag: str
    kind: ClassVar[str] = "tag"


@dataclass(frozen=True, slots=True)
class Gbnf:
    """Parses as its child; emits `grammar` verbatim in GBNF (an empty grammar hides the child)."""

    child: ParserId
    grammar: str
    kind: ClassVar[str] = "gbnf"


@dataclass(frozen=True, slots=True)
class Ac:
    """Parses as its child; in GBNF, an Aho-Corasick automaton that ends at the first delimiter."""

    child: ParserId
    delimiters: tuple[str, ...]
    kind: ClassVar[str] = "ac"


Node: TypeAlias = (
    Epsilon | Start | End | Literal | Sequence | Choice | Repetition | And | Not | Any_ | Space | Chars | String
    | Until | Schema | Rule | Ref | Atomic | Tag | Gbnf | Ac
)

NODE_TYPES: dict[str, type[Node]] = {
    cls.kind: cls
    for cls in (Epsilon, Start, End, Literal, Sequence, Choice, Repetition, And, Not, Any_, Space, Chars, String,
                Until, Schema, Rule, Ref, Atomic, Tag, Gbnf, Ac)
}


def child_ids(node: Node) -> tuple[ParserId, ...]:
    """Every arena id a node points at directly (lookahead, wrapper and schema children included)."""
    if isinstance(node, (Sequence, Choice)):
        return node.children
    if isinstance(node, (Repetition, And, Not, Schema, Rule, Atomic, Tag, Gbnf, Ac)):
        return (node.child,)
    return ()
