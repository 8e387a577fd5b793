"""PEG arena -> GBNF text, as llama.cpp's `common_peg_arena::build_grammar` writes it.

Every node kind has a fixed rendering (`to_gbnf`); the output must be byte-equal to the C++ because grammars
are compared as text in conformance data, so parenthesisation, quantifier suffixes and the `until-<id>` /
`ac-<id>` automaton rule names follow the C++ to the character.

Two entry points:

* `arena_to_gbnf(arena, lazy=False)` - a whole grammar (the JSON-schema converter's driver with just this
  arena's rules in it);
* `emit_rules(arena, builder, lazy)` - register the arena's rules into a grammar that is already being built
  (the C++ `parser.build_grammar(builder, lazy)` called inside `build_grammar([&](builder) {...})`), for
  callers that add rules of their own alongside.

The C++ walks its rule table, an `std::unordered_map`, in libstdc++'s iteration order, and that order shows
in the output when two emitted rules claim the same name with different bodies (the converter renames the
later one `name0`, `name1`, ...; e.g. rules the JSON-schema converter derives from two tools' schemas). We
walk the rules in that same order: `cpp_rule_table_order` replays libstdc++'s hashing and bucket layout.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, assert_never

from autoparser.errors import GrammarError
from autoparser.gbnf.from_schema import build_grammar
from autoparser.gbnf.schema import compile_schema
from autoparser.peg import nodes as N
from autoparser.peg.arena import Arena
from autoparser.peg.nodes import INVALID_ID, ParserId
from autoparser.peg.trie import AhoCorasick, Trie

__all__ = ["GrammarBuilder", "arena_to_gbnf", "cpp_rule_table_order", "emit_rules", "escape_char_class"]


class GrammarBuilder(Protocol):
    """The two callbacks `build_grammar` hands out (the C++ `common_grammar_builder`)."""

    def add_rule(self, name: str, rhs: str) -> str: ...

    def add_schema(self, name: str, node: Any) -> str: ...


def arena_to_gbnf(arena: Arena, *, lazy: bool = False) -> str:
    """The GBNF grammar of `arena`: rules reachable from the root (or, lazily, from the trigger rules)."""
    def callback(builder: GrammarBuilder) -> None:
        emit_rules(arena, builder, lazy)

    return build_grammar(callback)


def emit_rules(arena: Arena, builder: GrammarBuilder, lazy: bool = False) -> None:
    """Register the arena's grammar into `builder`: its reachable rules, then `root`.

    Non-lazy: the rules reachable from the root and `root ::= <root>`. Lazy: the trigger rules, whatever they
    reach, and `root ::= ` the trigger names sorted and joined by ` | ` (an empty body when there are none).
    """
    try:
        _Emitter(arena, builder).emit(lazy)
    except RecursionError:
        raise GrammarError("grammar nests too deeply to convert to GBNF") from None


# --- the C++ rule table's iteration order ---------------------------------------------------------------------

_M64 = (1 << 64) - 1
_MUL = (0xC6A4A793 << 32) + 0x5BD1E995
# (size reached, bucket count after the insert): libstdc++'s prime rehash policy, default load factor 1.0
_REHASH_AT = {1: 13, 14: 29, 30: 59, 60: 127, 128: 257, 258: 541, 542: 1109, 1110: 2357, 2358: 5087,
              5088: 10273, 10274: 20753, 20754: 42043, 42044: 85229, 85230: 172933}


def _shift_mix(v: int) -> int:
    return v ^ (v >> 47)


def _std_hash(name: str) -> int:
    """`std::hash<std::string>` of libstdc++ on 64-bit targets (`_Hash_bytes`, seed 0xc70f6907)."""
    data = name.encode("utf-8", "surrogateescape")
    n = len(data)
    aligned = n & ~7
    h = 0xC70F6907 ^ ((n * _MUL) & _M64)
    for i in range(0, aligned, 8):
        word = (_shift_mix((int.from_bytes(data[i:i + 8], "little") * _MUL) & _M64) * _MUL) & _M64
        h = ((h ^ word) * _MUL) & _M64
    if n & 7:
        h = ((h ^ int.from_bytes(data[aligned:], "little")) * _MUL) & _M64
    return _shift_mix((_shift_mix(h) * _MUL) & _M64)


def cpp_rule_table_order(names: list[str]) -> list[str]:
    """Iteration order of a libstdc++ `unordered_map<string, ...>` whose keys were first inserted in `names` order.

    The map is one list in which each bucket's nodes are contiguous: a key joining a non-empty bucket goes to
    the front of that bucket's run, a key opening a bucket goes to the front of the list, and a rehash
    rebuilds the list by walking the old one with the same two rules.
    """
    hashes = [_std_hash(n) for n in names]
    order: list[int] = []  # indices into names
    n_buckets = 1
    for count, key in enumerate(range(len(names)), start=1):
        grown = _REHASH_AT.get(count)  # (past 85 229 rules the order is no longer libstdc++'s)
        if grown is not None:
            n_buckets = grown
            rebuilt: list[int] = []
            starts: dict[int, int] = {}  # bucket -> index of its first node in `rebuilt` (list fronts shift it)
            for node in order:
                b = hashes[node] % n_buckets
                if b in starts:
                    rebuilt.insert(starts[b], node)
                    starts = {k: (v + 1 if v > starts[b] else v) for k, v in starts.items()}
                else:
                    rebuilt.insert(0, node)
                    starts = {k: v + 1 for k, v in starts.items()}
                    starts[b] = 0
            order = rebuilt
        b = hashes[key] % n_buckets
        at = next((i for i, node in enumerate(order) if hashes[node] % n_buckets == b), 0)
        order.insert(at, key)
    return [names[i] for i in order]


# --- character classes of the delimiter automata ----------------------------------------------------------


def escape_char_class(cp: int) -> str:
    """One code point inside a `[...]` class, written the way peg-parser.cpp writes automaton classes."""
    if cp in (0x2D, 0x5D, 0x5B, 0x5C):  # - ] [ \ would end or reshape the class
        return "\\" + chr(cp)
    if cp == 0x0A:
        return "\\n"
    if cp == 0x09:
        return "\\t"
    if cp == 0x0D:
        return "\\r"
    if 0x20 <= cp <= 0x7E:
        return chr(cp)
    if cp <= 0xFF:
        return f"\\x{cp:02X}"
    if cp <= 0xFFFF:
        return f"\\u{cp:04X}"
    return f"\\U{cp:08X}"


def _char_class(cps: list[int], negate: bool) -> str:
    return ("[^" if negate else "[") + "".join(escape_char_class(c) for c in cps) + "]"


# A rule body builder: (completing chars, {destination state: chars}, specific chars, state namer) -> rhs.
_RuleBody = Callable[[list[int], dict[int, list[int]], list[int], Callable[[int], str]], str]


def _ac_grammar(builder: GrammarBuilder, prefix: str, delimiters: tuple[str, ...], body: _RuleBody) -> str:
    """One rule per non-matching state of the delimiters' Aho-Corasick automaton; returns the start rule name."""
    ac = AhoCorasick(Trie(list(delimiters)))

    def state_name(s: int) -> str:
        return prefix if s == 0 else f"{prefix}-{s:02d}"

    for q in range(ac.size()):
        if ac.terminal(q):
            continue  # a delimiter has been seen: nothing left to generate from here
        buckets: dict[int, list[int]] = {}
        completing: list[int] = []
        specific: list[int] = []
        for c in ac.alphabet:
            d = ac.next(q, c)
            if ac.terminal(d):
                completing.append(c)
                specific.append(c)
            elif d != 0:
                buckets.setdefault(d, []).append(c)
                specific.append(c)
        ordered = {d: buckets[d] for d in sorted(buckets)}  # the C++ keeps buckets in a std::map
        builder.add_rule(state_name(q), body(completing, ordered, specific, state_name))
    if ac.terminal(0):
        # An empty delimiter matches at once; the start rule must still exist and match "". The C++ emits
        # `x ::= |`, which llama.cpp's own grammar parser misreads when another rule follows (after a `|` it
        # skips the newline and takes the next rule's name as this alternative): `""` means the same and loads.
        builder.add_rule(prefix, '""')
    return state_name(0)


def _excluding_body(completing: list[int], buckets: dict[int, list[int]], specific: list[int],
                    state_name: Callable[[int], str]) -> str:
    # Every state may stop, and a character that would complete a delimiter has no alternative at all.
    rhs = "|"
    for d, chars in buckets.items():
        rhs += f" {_char_class(chars, False)} {state_name(d)} |"
    return rhs + f" {_char_class(specific, True)} {state_name(0)}"


def _including_body(completing: list[int], buckets: dict[int, list[int]], specific: list[int],
                    state_name: Callable[[int], str]) -> str:
    # The only way to end is to complete a delimiter, so the match stops at the first one.
    alts: list[str] = []
    if completing:
        alts.append(_char_class(completing, False))
    alts.extend(f"{_char_class(chars, False)} {state_name(d)}" for d, chars in buckets.items())
    alts.append(f"{_char_class(specific, True)} {state_name(0)}")
    return " | ".join(alts)


def _quantified(text: str, lo: int, hi: int) -> str:
    if (lo, hi) == (0, 1):
        return text + "?"
    if (lo, hi) == (0, -1):
        return text + "*"
    if (lo, hi) == (1, -1):
        return text + "+"
    if hi == -1:
        return f"{text}{{{lo},}}"
    if lo == hi:
        return text if lo == 1 else f"{text}{{{lo}}}"
    return f"{text}{{{lo},{hi}}}"


# --- the emitter ----------------------------------------------------------------------------------------------


class _Emitter:
    def __init__(self, arena: Arena, builder: GrammarBuilder) -> None:
        self.arena = arena
        self.parsers = arena.parsers
        self.builder = builder
        # id(schema value) -> (value, compiled document): each document is compiled once per emission; the
        # value is held so its id cannot be reused by another object meanwhile.
        self._docs: dict[int, tuple[Any, Any]] = {}

    def node(self, pid: ParserId) -> N.Node:
        try:
            return self.parsers[pid]
        except IndexError:
            raise GrammarError(f"parser id {pid} is not in the arena") from None

    # schema nodes ---------------------------------------------------------------------------------------------

    def schema_node(self, p: N.Schema) -> Any:
        """The compiled sub-schema a schema node stands for, or None when it has no schema."""
        if p.schema is None:
            return None
        key = id(p.schema)
        cached = self._docs.get(key)
        if cached is None:
            cached = (p.schema, compile_schema(p.schema))
            self._docs[key] = cached
        doc = cached[1]
        if not p.pointer:
            return doc.root
        return doc.resolve_pointer(p.pointer)

    def delegates(self, p: N.Schema) -> bool:
        """A schema node emits its child's grammar when it has no schema, or is raw and may be a plain string."""
        node = self.schema_node(p)
        return node is None or (p.raw and bool(node.may_be_string()))

    def effective(self, pid: ParserId) -> N.Node:
        """The node behind transparent wrappers; decides whether a child needs parentheses."""
        while True:
            p = self.node(pid)
            if isinstance(p, (N.Tag, N.Atomic)) or (isinstance(p, N.Schema) and self.delegates(p)):
                pid = p.child
            else:
                return p

    # to_gbnf -------------------------------------------------------------------------------------------------

    def to_gbnf(self, pid: ParserId) -> str:
        from autoparser.gbnf.model import gbnf_format_literal

        p = self.node(pid)
        match p:
            case N.Epsilon() | N.Start() | N.End() | N.And() | N.Not():
                return ""  # no text, or a lookahead GBNF cannot express
            case N.Literal(literal=s):
                return gbnf_format_literal(s)
            case N.Sequence(children=children):
                parts: list[str] = []
                for c in children:
                    text = self.to_gbnf(c)
                    if not text:
                        continue
                    if isinstance(self.effective(c), (N.Choice, N.Sequence)):
                        text = f"({text})"
                    parts.append(text)
                return " ".join(parts)
            case N.Choice(children=children):
                # Not a join: the separator is only written once something precedes it, so empty leading
                # alternatives vanish while later ones leave `| |` behind, as in the C++.
                out = ""
                for c in children:
                    if out:
                        out += " | "
                    text = self.to_gbnf(c)
                    out += f"({text})" if isinstance(self.effective(c), N.Choice) else text
                return out
            case N.Repetition(child=c, min_count=lo, max_count=hi):
                text = self.to_gbnf(c)
                if isinstance(self.effective(c), (N.Choice, N.Sequence)):
                    text = f"({text})"
                return _quantified(text, lo, hi)
            case N.Any_():
                return "."
            case N.Space():
                return "space"
            case N.Chars(pattern=pattern, min_count=lo, max_count=hi):
                return _quantified(pattern, lo, hi)
            case N.String(delimiter=d):
                return f'( [^{d}\\\\] | "\\\\" ( [{d}\\\\/ bfnrt] | "u" [0-9a-fA-F]{{4}} ) )*'
            case N.Until(delimiters=delimiters):
                if not delimiters:
                    return ".*"
                return _ac_grammar(self.builder, f"until-{pid}", delimiters, _excluding_body)
            case N.Schema(child=c, name=name):
                if self.delegates(p):
                    return self.to_gbnf(c)
                return self.builder.add_schema(name, self.schema_node(p))
            case N.Rule(name=name) | N.Ref(name=name):
                return name
            case N.Tag(child=c) | N.Atomic(child=c):
                return self.to_gbnf(c)
            case N.Gbnf(grammar=grammar):
                return grammar
            case N.Ac(delimiters=delimiters):
                return _ac_grammar(self.builder, f"ac-{pid}", delimiters, _including_body)
        assert_never(p)

    # reachability ------------------------------------------------------------------------------------------

    def reachable_rules(self, start: ParserId) -> set[str]:
        """Names of the rules reachable from `start`, through every child (lookaheads, gbnf and schema too)."""
        reachable: set[str] = set()
        stack = [start]
        while stack:
            p = self.node(stack.pop())
            if isinstance(p, N.Rule):
                if p.name in reachable:
                    continue
                reachable.add(p.name)
                stack.append(p.child)
            elif isinstance(p, N.Ref):
                stack.append(self.arena.get_rule(p.name))
            else:
                stack.extend(reversed(N.child_ids(p)))
        return reachable

    def emit(self, lazy: bool) -> None:
        rules = self.arena.rules
        names = cpp_rule_table_order(list(rules))
        triggers = [n for n in names if isinstance(r := self.node(rules[n]), N.Rule) and r.trigger]
        reachable: set[str] = set()
        if lazy:
            for name in triggers:
                reachable.add(name)
                reachable |= self.reachable_rules(rules[name])
        elif self.arena.root != INVALID_ID:
            reachable = self.reachable_rules(self.arena.root)
        else:
            # the C++ fails here too (its reachability walk starts from the invalid id)
            raise GrammarError("No root parser set")
        for name in names:
            if name not in reachable:
                continue
            rule = self.node(rules[name])
            if isinstance(rule, N.Rule):
                self.builder.add_rule(rule.name, self.to_gbnf(rule.child))
        if lazy:
            trigger_names = sorted(r.name for n in triggers if isinstance(r := self.node(rules[n]), N.Rule))
            self.builder.add_rule("root", " | ".join(trigger_names))
        else:
            self.builder.add_rule("root", self.to_gbnf(self.arena.root))
