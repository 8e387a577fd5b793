"""The combinator DSL: `Builder` methods with the C++ builder's names, and `P` handles with `+ | <<` operators.

Every call that creates a node consumes the next arena id, in call order, exactly as the C++ builder does;
GBNF rule names (`until-<id>`, `ac-<id>`) depend on it. Python evaluates operands left to right, so `a + "x"`
creates the literal for "x" and then the sequence.

    b = Builder()
    greeting = b.literal("hello") << "world"          # "hello" space "world"
    arena = b.build(root=greeting)
    arena.parse("hello   world").success
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any, Union

from autoparser.errors import GrammarError
from autoparser.peg import nodes as N
from autoparser.peg.arena import Arena, resolve_refs
from autoparser.peg.nodes import INVALID_ID, Node, ParserId
from autoparser.peg.utf8 import parse_char_class

Operand = Union["P", str]

_RULE_NAME_JUNK = re.compile(r"[^a-zA-Z0-9-]+")


def rule_name(name: str) -> str:
    """Sanitise a rule name as the C++ does: every run of characters outside [a-zA-Z0-9-] becomes one `-`."""
    return _RULE_NAME_JUNK.sub("-", name)


class P:
    """A handle on one arena node. Operators build sequences and choices; strings become literals."""

    __slots__ = ("b", "id")

    def __init__(self, builder: Builder, pid: ParserId) -> None:
        self.b = builder
        self.id = pid

    def __add__(self, other: Operand) -> P:
        o = self.b.wrap(other)
        return self.b.sequence([self, o])

    def __radd__(self, other: str) -> P:
        o = self.b.wrap(other)
        return self.b.sequence([o, self])

    def __or__(self, other: Operand) -> P:
        o = self.b.wrap(other)
        return self.b.choice([self, o])

    def __ror__(self, other: str) -> P:
        o = self.b.wrap(other)
        return self.b.choice([o, self])

    def __lshift__(self, other: Operand) -> P:
        """`a << b`: a, optional whitespace, b. A string operand's literal is created before the space node."""
        o = self.b.wrap(other)
        sp = self.b.space()
        return self.b.sequence([self, sp, o])

    def __rlshift__(self, other: str) -> P:
        lit = self.b.literal(other)
        sp = self.b.space()
        return self.b.sequence([lit, sp, self])

    def __repr__(self) -> str:
        return f"P({self.id}: {self.b.parsers[self.id]!r})"


class Builder:
    """Creates nodes into a growing arena. `build(root)` resolves rule references and freezes the arena."""

    def __init__(self) -> None:
        self.parsers: list[Node] = []
        self.rules: dict[str, ParserId] = {}
        self.root: ParserId = INVALID_ID

    # --- plumbing ------------------------------------------------------------------------------------------

    def add(self, node: Node) -> P:
        self.parsers.append(node)
        return P(self, len(self.parsers) - 1)

    def wrap(self, p: Operand) -> P:
        return p if isinstance(p, P) else self.literal(p)

    def _ids(self, parts: Iterable[Operand]) -> list[P]:
        return [self.wrap(p) for p in parts]

    # --- primitives ----------------------------------------------------------------------------------------

    def eps(self) -> P:
        return self.add(N.Epsilon())

    def start(self) -> P:
        return self.add(N.Start())

    def end(self) -> P:
        return self.add(N.End())

    def literal(self, s: str) -> P:
        return self.add(N.Literal(s))

    def sequence(self, parts: Iterable[Operand] = ()) -> P:
        """One new sequence node; children that are sequences contribute their children (flattening)."""
        kids: list[ParserId] = []
        for p in self._ids(parts):
            node = self.parsers[p.id]
            if isinstance(node, N.Sequence):
                kids.extend(node.children)
            else:
                kids.append(p.id)
        return self.add(N.Sequence(tuple(kids)))

    def choice(self, parts: Iterable[Operand] = ()) -> P:
        kids: list[ParserId] = []
        for p in self._ids(parts):
            node = self.parsers[p.id]
            if isinstance(node, N.Choice):
                kids.extend(node.children)
            else:
                kids.append(p.id)
        return self.add(N.Choice(tuple(kids)))

    def repeat(self, p: Operand, min_count: int, max_count: int | None = None) -> P:
        """`repeat(p, n)` is exactly n; `repeat(p, lo, hi)` with hi == -1 unbounded."""
        hi = min_count if max_count is None else max_count
        return self.add(N.Repetition(self.wrap(p).id, min_count, hi))

    def optional(self, p: Operand) -> P:
        return self.repeat(p, 0, 1)

    def zero_or_more(self, p: Operand) -> P:
        return self.repeat(p, 0, -1)

    def one_or_more(self, p: Operand) -> P:
        return self.repeat(p, 1, -1)

    def peek(self, p: Operand) -> P:
        return self.add(N.And(self.wrap(p).id))

    def negate(self, p: Operand) -> P:
        return self.add(N.Not(self.wrap(p).id))

    def any(self) -> P:
        return self.add(N.Any_())

    def space(self) -> P:
        return self.add(N.Space())

    def chars(self, classes: str, min_count: int = 1, max_count: int = -1) -> P:
        if not classes:
            raise GrammarError("chars() needs a character class")
        ranges, negated = parse_char_class(classes)
        return self.add(N.Chars(classes, ranges, negated, min_count, max_count))

    def string_content(self, delimiter: str) -> P:
        if len(delimiter) != 1:
            raise GrammarError(f"string_content() delimiter must be one character, got {delimiter!r}")
        return self.add(N.String(delimiter))

    def until(self, delimiter: str) -> P:
        return self.add(N.Until((delimiter,)))

    def until_one_of(self, delimiters: Iterable[str]) -> P:
        return self.add(N.Until(tuple(delimiters)))

    def rest(self) -> P:
        return self.until_one_of(())

    def ref(self, name: str) -> P:
        return self.add(N.Ref(name))

    def atomic(self, p: Operand) -> P:
        return self.add(N.Atomic(self.wrap(p).id))

    def tag(self, tag: str, p: Operand) -> P:
        return self.add(N.Tag(self.wrap(p).id, tag))

    def gbnf(self, p: Operand, grammar: str) -> P:
        return self.add(N.Gbnf(self.wrap(p).id, grammar))

    def ac(self, p: Operand, delimiters: str | Iterable[str]) -> P:
        ds = (delimiters,) if isinstance(delimiters, str) else tuple(delimiters)
        if not ds:
            raise GrammarError("ac() requires at least one delimiter")
        return self.add(N.Ac(self.wrap(p).id, ds))

    def schema(self, p: Operand, name: str, schema: Any, raw: bool = False, pointer: str = "") -> P:
        """Parse as `p`; emit the JSON-schema grammar of `schema` (sub-schema at `pointer`) in GBNF."""
        return self.add(N.Schema(self.wrap(p).id, name, raw, schema, pointer))

    # --- rules -----------------------------------------------------------------------------------------------

    def rule(self, name: str, p: Operand | Callable[[], P], trigger: bool = False) -> P:
        """Register a named rule and return a reference to it.

        With a callable, an already registered name is reused as is (so callers can pre-register, e.g., a
        flexible `json-string`), and a placeholder is registered first so the body may refer to itself.
        """
        clean = rule_name(name)
        if callable(p):
            if clean in self.rules:
                return self.ref(clean)
            placeholder = self.any()
            self.rules[clean] = self.add(N.Rule(clean, placeholder.id, trigger)).id
            body = p()
            self.rules[clean] = self.add(N.Rule(clean, body.id, trigger)).id
            return self.ref(clean)
        body_p = self.wrap(p)
        self.rules[clean] = self.add(N.Rule(clean, body_p.id, trigger)).id
        return self.ref(clean)

    def trigger_rule(self, name: str, p: Operand | Callable[[], P]) -> P:
        return self.rule(name, p, trigger=True)

    def set_root(self, p: Operand) -> None:
        self.root = self.wrap(p).id

    def build(self, root: Operand | None = None) -> Arena:
        if root is not None:
            self.set_root(root)
        parsers = list(self.parsers)
        new_root = resolve_refs(parsers, self.rules, self.root)
        return Arena(parsers, self.rules, new_root)

    # --- composite helpers (shapes and rule names as in the C++) --------------------------------------------

    def double_quoted_string(self) -> P:
        return self.rule("double-quoted-string",
                         lambda: self.sequence([self.literal('"'), self.string_content('"'), self.literal('"')]))

    def single_quoted_string(self) -> P:
        return self.rule("single-quoted-string",
                         lambda: self.sequence([self.literal("'"), self.string_content("'"), self.literal("'")]))

    def quoted_string(self) -> P:
        return self.rule("quoted-string",
                         lambda: self.choice([self.double_quoted_string(), self.single_quoted_string()]))

    def json_number(self) -> P:
        def body() -> P:
            digit1_9 = self.chars("[1-9]", 1, 1)
            digits = self.chars("[0-9]")
            int_part = self.choice([self.literal("0"), self.sequence([digit1_9, self.chars("[0-9]", 0, -1)])])
            frac = self.sequence([self.literal("."), digits])
            exp = self.sequence([self.choice([self.literal("e"), self.literal("E")]),
                                 self.optional(self.chars("[+-]", 1, 1)), digits])
            # A number is only committed once the next character cannot extend it: at the end of a lenient
            # input the lookahead asks for more, so "3" is not reported while "3.14" may still be coming.
            not_continued = self.negate(self.chars("[0-9.eE+-]", 1, 1))
            return self.sequence([self.optional(self.literal("-")), int_part, self.optional(frac),
                                  self.optional(exp), not_continued])

        return self.rule("json-number", body)

    def json_string(self) -> P:
        return self.rule("json-string",
                         lambda: self.sequence([self.literal('"'), self.string_content('"'), self.literal('"')]))

    def json_bool(self) -> P:
        return self.rule("json-bool", lambda: self.choice([self.literal("true"), self.literal("false")]))

    def json_null(self) -> P:
        return self.rule("json-null", lambda: self.literal("null"))

    def json_object(self) -> P:
        def body() -> P:
            ws = self.space()
            member = self.sequence([self.json_string(), ws, self.literal(":"), ws, self.json()])
            members = self.sequence([member, self.zero_or_more(self.sequence([ws, self.literal(","), ws, member]))])
            return self.sequence([self.literal("{"), ws,
                                  self.choice([self.literal("}"), self.sequence([members, ws, self.literal("}")])])])

        return self.rule("json-object", body)

    def json_array(self) -> P:
        def body() -> P:
            ws = self.space()
            elements = self.sequence([self.json(), self.zero_or_more(self.sequence([ws, self.literal(","), ws,
                                                                                     self.json()]))])
            return self.sequence([self.literal("["), ws,
                                  self.choice([self.literal("]"), self.sequence([elements, ws, self.literal("]")])])])

        return self.rule("json-array", body)

    def json(self) -> P:
        return self.rule("json-value", lambda: self.choice([
            self.json_object(), self.json_array(), self.json_string(), self.json_number(), self.json_bool(),
            self.json_null()]))

    def json_member(self, key: str, p: Operand) -> P:
        ws = self.space()
        return self.sequence([self.literal(f'"{key}"'), ws, self.literal(":"), ws, self.wrap(p)])

    def python_string(self) -> P:
        return self.rule("python-string",
                         lambda: self.choice([self.double_quoted_string(), self.single_quoted_string()]))

    def python_number(self) -> P:
        return self.json_number()

    def python_bool(self) -> P:
        return self.rule("python-bool", lambda: self.choice([self.literal("True"), self.literal("False")]))

    def python_null(self) -> P:
        return self.rule("python-none", lambda: self.literal("None"))

    def python_dict(self) -> P:
        def body() -> P:
            ws = self.space()
            member = self.sequence([self.python_string(), ws, self.literal(":"), ws, self.python_value()])
            members = self.sequence([member, self.zero_or_more(self.sequence([ws, self.literal(","), ws, member]))])
            return self.sequence([self.literal("{"), ws,
                                  self.choice([self.literal("}"), self.sequence([members, ws, self.literal("}")])]),
                                  ws])

        return self.rule("python-dict", body)

    def python_array(self) -> P:
        def body() -> P:
            ws = self.space()
            # no whitespace before commas here, unlike json_array: kept as in the C++
            elements = self.sequence([self.python_value(),
                                      self.zero_or_more(self.sequence([self.literal(","), ws, self.python_value()]))])
            return self.sequence([self.literal("["), ws,
                                  self.choice([self.literal("]"), self.sequence([elements, ws, self.literal("]")])]),
                                  ws])

        return self.rule("python-array", body)

    def python_value(self) -> P:
        return self.rule("python-value", lambda: self.choice([
            self.python_dict(), self.python_array(), self.python_string(), self.python_number(),
            self.python_bool(), self.python_null()]))

    def marker(self) -> P:
        """A `<...>` or `[...]` marker (no rule, no tag)."""
        angle = self.literal("<") + self.until(">") + self.literal(">")
        square = self.literal("[") + self.until("]") + self.literal("]")
        return self.choice([angle, square])


def build_peg_parser(fn: Callable[[Builder], Operand]) -> Arena:
    """New builder, root = fn(builder), build. The usual way to make a one-off parser."""
    b = Builder()
    root = fn(b)
    return b.build(root)
