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
        """Append `node` to the arena (it takes the next id) and return its handle."""
        self.parsers.append(node)
        return P(self, len(self.parsers) - 1)

    def wrap(self, p: Operand) -> P:
        """`p` itself, or a new literal for a string."""
        return p if isinstance(p, P) else self.literal(p)

    def _ids(self, parts: Iterable[Operand]) -> list[P]:
        return [self.wrap(p) for p in parts]

    # --- primitives ----------------------------------------------------------------------------------------

    def eps(self) -> P:
        """`ε`: matches the empty string."""
        return self.add(N.Epsilon())

    def start(self) -> P:
        """`^`: matches only at the start of the input."""
        return self.add(N.Start())

    def end(self) -> P:
        """`$`: matches only at the end of the input."""
        return self.add(N.End())

    def literal(self, s: str) -> P:
        """`"s"`: the exact text `s`."""
        return self.add(N.Literal(s))

    def sequence(self, parts: Iterable[Operand] = ()) -> P:
        """`a b ...`: each part in turn; children that are sequences contribute their children (flattening)."""
        kids: list[ParserId] = []
        for p in self._ids(parts):
            node = self.parsers[p.id]
            if isinstance(node, N.Sequence):
                kids.extend(node.children)
            else:
                kids.append(p.id)
        return self.add(N.Sequence(tuple(kids)))

    def choice(self, parts: Iterable[Operand] = ()) -> P:
        """`a | b | ...`: the first alternative that matches (ordered choice); children that are choices
        contribute their alternatives (flattening)."""
        kids: list[ParserId] = []
        for p in self._ids(parts):
            node = self.parsers[p.id]
            if isinstance(node, N.Choice):
                kids.extend(node.children)
            else:
                kids.append(p.id)
        return self.add(N.Choice(tuple(kids)))

    def repeat(self, p: Operand, min_count: int, max_count: int | None = None) -> P:
        """`p{lo,hi}`: `repeat(p, n)` is exactly n; `repeat(p, lo, hi)` with hi == -1 unbounded."""
        hi = min_count if max_count is None else max_count
        return self.add(N.Repetition(self.wrap(p).id, min_count, hi))

    def optional(self, p: Operand) -> P:
        """`p?`: p, or nothing."""
        return self.repeat(p, 0, 1)

    def zero_or_more(self, p: Operand) -> P:
        """`p*`: as many p as match (possessive, as every PEG repetition)."""
        return self.repeat(p, 0, -1)

    def one_or_more(self, p: Operand) -> P:
        """`p+`: at least one p."""
        return self.repeat(p, 1, -1)

    def peek(self, p: Operand) -> P:
        """`&p`: succeeds where p matches, consuming nothing."""
        return self.add(N.And(self.wrap(p).id))

    def negate(self, p: Operand) -> P:
        """`!p`: succeeds where p does not match, consuming nothing."""
        return self.add(N.Not(self.wrap(p).id))

    def any(self) -> P:
        """`.`: any one character."""
        return self.add(N.Any_())

    def space(self) -> P:
        """`space`: zero or more whitespace characters (the C locale's six)."""
        return self.add(N.Space())

    def chars(self, classes: str, min_count: int = 1, max_count: int = -1) -> P:
        """`[classes]{min,max}`: characters of a class such as `[a-z0-9_]` (max -1: unbounded)."""
        if not classes:
            raise GrammarError("chars() needs a character class")
        ranges, negated = parse_char_class(classes)
        return self.add(N.Chars(classes, ranges, negated, min_count, max_count))

    def string_content(self, delimiter: str) -> P:
        """`string(d)`: the body of a JSON-style string up to its unescaped closing `delimiter` (not included)."""
        if len(delimiter) != 1:
            raise GrammarError(f"string_content() delimiter must be one character, got {delimiter!r}")
        return self.add(N.String(delimiter))

    def until(self, delimiter: str) -> P:
        """`until("d")`: everything up to the first `delimiter` (not included), or to the end."""
        return self.add(N.Until((delimiter,)))

    def until_one_of(self, delimiters: Iterable[str]) -> P:
        """`until("d1", "d2", ...)`: everything up to the first of the delimiters (not included), or to the end."""
        return self.add(N.Until(tuple(delimiters)))

    def rest(self) -> P:
        """`rest`: everything to the end of the input."""
        return self.until_one_of(())

    def ref(self, name: str) -> P:
        """`name`: the rule of that name (resolved when the arena is built, so rules may recurse)."""
        return self.add(N.Ref(name))

    def atomic(self, p: Operand) -> P:
        """`atomic(p)`: p, but on partial input it reports nothing half-matched (all of p, or none of it)."""
        return self.add(N.Atomic(self.wrap(p).id))

    def tag(self, tag: str, p: Operand) -> P:
        """`tag:(p)`: p, its match labelled in the AST (the chat mapper reads the labels)."""
        return self.add(N.Tag(self.wrap(p).id, tag))

    def gbnf(self, p: Operand, grammar: str) -> P:
        """Parses as p; emits `grammar` as its GBNF instead of p's."""
        return self.add(N.Gbnf(self.wrap(p).id, grammar))

    def ac(self, p: Operand, delimiters: str | Iterable[str]) -> P:
        """Parses as p; in GBNF, any text up to and including the first delimiter (an Aho-Corasick automaton)."""
        ds = (delimiters,) if isinstance(delimiters, str) else tuple(delimiters)
        if not ds:
            raise GrammarError("ac() requires at least one delimiter")
        return self.add(N.Ac(self.wrap(p).id, ds))

    def schema(self, p: Operand, name: str, schema: Any, raw: bool = False, pointer: str = "") -> P:
        """`schema<name>(p)`: parses as p; emits the JSON-schema grammar of `schema` (sub-schema at `pointer`)."""
        return self.add(N.Schema(self.wrap(p).id, name, raw, schema, pointer))

    # --- rules -----------------------------------------------------------------------------------------------

    def rule(self, name: str, p: Operand | Callable[[], P], trigger: bool = False) -> P:
        """`name <- p`: register a named rule and return a reference to it.

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
        """A rule that starts a lazy grammar: the GBNF root is the trigger rules when the grammar is lazy."""
        return self.rule(name, p, trigger=True)

    def set_root(self, p: Operand) -> None:
        """The parser `build()` and `parse()` start from."""
        self.root = self.wrap(p).id

    def build(self, root: Operand | None = None) -> Arena:
        """The finished arena: rule references resolved, `root` (if given) as its root."""
        if root is not None:
            self.set_root(root)
        parsers = list(self.parsers)
        new_root = resolve_refs(parsers, self.rules, self.root)
        return Arena(parsers, self.rules, new_root)

    # --- composite helpers (shapes and rule names as in the C++) --------------------------------------------

    def double_quoted_string(self) -> P:
        """`double-quoted-string <- '"' string('"') '"'`."""
        return self.rule("double-quoted-string",
                         lambda: self.sequence([self.literal('"'), self.string_content('"'), self.literal('"')]))

    def single_quoted_string(self) -> P:
        """`single-quoted-string <- "'" string("'") "'"`."""
        return self.rule("single-quoted-string",
                         lambda: self.sequence([self.literal("'"), self.string_content("'"), self.literal("'")]))

    def quoted_string(self) -> P:
        """`quoted-string <- double-quoted-string | single-quoted-string`."""
        return self.rule("quoted-string",
                         lambda: self.choice([self.double_quoted_string(), self.single_quoted_string()]))

    def json_number(self) -> P:
        """`json-number <- "-"? int frac? exp? ![0-9.eE+-]`: a JSON number, committed only once it cannot grow."""
        def body() -> P:
            digit1_9 = self.chars("[1-9]", 1, 1)
            digits = self.chars("[0-9]")
            int_part = self.choice([self.literal("0"), self.sequence([digit1_9, self.chars("[0-9]", 0, -1)])])
            frac = self.sequence([self.literal("."), digits])
            exp = self.sequence([self.choice([self.literal("e"), self.literal("E")]),
                                 self.optional(self.chars("[+-]", 1, 1)), digits])
            # A number is only committed once the next character cannot extend it: at the end of partial
            # input the lookahead asks for more, so "3" is not reported while "3.14" may still be coming.
            not_continued = self.negate(self.chars("[0-9.eE+-]", 1, 1))
            return self.sequence([self.optional(self.literal("-")), int_part, self.optional(frac),
                                  self.optional(exp), not_continued])

        return self.rule("json-number", body)

    def json_string(self) -> P:
        """`json-string <- '"' string('"') '"'`."""
        return self.rule("json-string",
                         lambda: self.sequence([self.literal('"'), self.string_content('"'), self.literal('"')]))

    def json_bool(self) -> P:
        """`json-bool <- "true" | "false"`."""
        return self.rule("json-bool", lambda: self.choice([self.literal("true"), self.literal("false")]))

    def json_null(self) -> P:
        """`json-null <- "null"`."""
        return self.rule("json-null", lambda: self.literal("null"))

    def json_object(self) -> P:
        """`json-object <- "{" space (member ("," member)*)? space "}"`, members `json-string ":" json-value`."""
        return self.rule("json-object", lambda: self._object(self.json_string, self.json))

    def json_array(self) -> P:
        """`json-array <- "[" space (json-value ("," json-value)*)? space "]"`."""
        def body() -> P:
            ws = self.space()
            elements = self.sequence([self.json(), self.zero_or_more(self.sequence([ws, self.literal(","), ws,
                                                                                     self.json()]))])
            return self._bracketed("[", elements, ws, "]")

        return self.rule("json-array", body)

    def _object(self, key: Callable[[], P], value: Callable[[], P], space_after: bool = False) -> P:
        """The body of `json-object` or `python-dict`: `key space ":" space value` members between braces.
        key() is made before the colon's literal and value() after it, as the C++ makes them: node ids (and so
        GBNF rule names) follow that order."""
        ws = self.space()
        member = self.sequence([key(), ws, self.literal(":"), ws, value()])
        members = self.sequence([member, self.zero_or_more(self.sequence([ws, self.literal(","), ws, member]))])
        return self._bracketed("{", members, ws, "}", space_after)

    def _bracketed(self, open_: str, items: P, ws: P, close: str, space_after: bool = False) -> P:
        """`open space (close | items space close)`, then `space` for the Python forms: the brackets of a JSON
        or Python object or array around `items`, its contents when not empty."""
        parts = [self.literal(open_), ws,
                 self.choice([self.literal(close), self.sequence([items, ws, self.literal(close)])])]
        return self.sequence([*parts, ws] if space_after else parts)

    def json(self) -> P:
        """`json-value <- json-object | json-array | json-string | json-number | json-bool | json-null`."""
        return self.rule("json-value", lambda: self.choice([
            self.json_object(), self.json_array(), self.json_string(), self.json_number(), self.json_bool(),
            self.json_null()]))

    def json_member(self, key: str, p: Operand) -> P:
        """`'"key"' space ":" space p`: one member of a JSON object with a fixed key."""
        ws = self.space()
        return self.sequence([self.literal(f'"{key}"'), ws, self.literal(":"), ws, self.wrap(p)])

    def python_string(self) -> P:
        """`python-string <- double-quoted-string | single-quoted-string`."""
        return self.rule("python-string",
                         lambda: self.choice([self.double_quoted_string(), self.single_quoted_string()]))

    def python_number(self) -> P:
        """A Python number literal, read as a JSON number."""
        return self.json_number()

    def python_bool(self) -> P:
        """`python-bool <- "True" | "False"`."""
        return self.rule("python-bool", lambda: self.choice([self.literal("True"), self.literal("False")]))

    def python_null(self) -> P:
        """`python-none <- "None"`."""
        return self.rule("python-none", lambda: self.literal("None"))

    def python_dict(self) -> P:
        """`python-dict <- "{" space (python-string ":" python-value ("," ...)*)? space "}" space`."""
        return self.rule("python-dict", lambda: self._object(self.python_string, self.python_value, space_after=True))

    def python_array(self) -> P:
        """`python-array <- "[" space (python-value ("," space python-value)*)? space "]" space`."""
        def body() -> P:
            ws = self.space()
            # no whitespace before commas here, unlike json_array: kept as in the C++
            elements = self.sequence([self.python_value(),
                                      self.zero_or_more(self.sequence([self.literal(","), ws, self.python_value()]))])
            return self._bracketed("[", elements, ws, "]", space_after=True)

        return self.rule("python-array", body)

    def python_value(self) -> P:
        """`python-value <- python-dict | python-array | python-string | python-number | python-bool | python-none`."""
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
