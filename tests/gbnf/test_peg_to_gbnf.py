"""PEG -> GBNF emission, byte for byte: every case of llama.cpp's tests/peg-parser/test-gbnf-generation.cpp.

Compared as the C++ test compares: leading whitespace of every line trimmed from both sides.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from autoparser.errors import GrammarError
from autoparser.gbnf.from_peg import arena_to_gbnf, cpp_rule_table_order, emit_rules, escape_char_class
from autoparser.peg import Arena, Builder, build_peg_parser
from autoparser.peg.builder import P

SPACE = 'space ::= | " " | "\\n"{1,2} [ \\t]{0,20}'


def trim_leading_space(s: str) -> str:
    # std::regex `(^|\n)\s+` -> `$1`: `^` is the start of the text only, and `\s+` also eats blank lines
    return re.sub(r"(^|\n)\s+", r"\1", s)


@dataclass(frozen=True)
class Case:
    id: str
    build: Callable[[Builder], P]
    expected: str
    lazy: bool = False


def _trigger_rules(p: Builder) -> P:
    rule1 = p.rule("rule-1", p.literal("a") + p.ref("rule-2"))
    p.rule("rule-2", p.literal("b") + p.ref("rule-3"), True)
    p.rule("rule-3", p.literal("c") + p.ref("rule-4"))
    p.rule("rule-4", p.literal("d"), True)
    return rule1


def _rule_references(p: Builder) -> P:
    digit = p.rule("digit", p.chars("[0-9]", 1, 1))
    return p.one_or_more(digit)


def _reachable(p: Builder) -> P:
    p.rule("orphan", p.literal("orphan"))
    return p.literal("hello") + p.rule("child", p.literal(" world"))


CASES = [
    Case("literal grammar generation", lambda p: p.literal("hello"), f"""
        root ::= "hello"
        {SPACE}
    """),
    Case("char class grammar", lambda p: p.chars("[a-z]", 1, 1), f"""
        root ::= [a-z]
        {SPACE}
    """),
    Case("sequence grammar", lambda p: p.literal("hello") + p.literal(" ") + p.literal("world"), f"""
        root ::= "hello" " " "world"
        {SPACE}
    """),
    Case("choice grammar", lambda p: p.literal("cat") | p.literal("dog"), f"""
        root ::= "cat" | "dog"
        {SPACE}
    """),
    Case("one_or_more grammar", lambda p: p.one_or_more(p.literal("a")), f"""
        root ::= "a"+
        {SPACE}
    """),
    Case("zero_or_more grammar", lambda p: p.zero_or_more(p.literal("a")), f"""
        root ::= "a"*
        {SPACE}
    """),
    Case("optional grammar", lambda p: p.literal("hello") + p.optional(p.literal(" world")), f"""
        root ::= "hello" " world"?
        {SPACE}
    """),
    Case("until grammar", lambda p: p.until("</tag>"), f"""
        root ::= until-0
        {SPACE}
        until-0 ::= | [<] until-0-01 | [^<] until-0
        until-0-01 ::= | [<] until-0-01 | [/] until-0-02 | [^/<] until-0
        until-0-02 ::= | [<] until-0-01 | [t] until-0-03 | [^<t] until-0
        until-0-03 ::= | [<] until-0-01 | [a] until-0-04 | [^<a] until-0
        until-0-04 ::= | [<] until-0-01 | [g] until-0-05 | [^<g] until-0
        until-0-05 ::= | [<] until-0-01 | [^<>] until-0
    """),
    Case("until grammar overlapping delimiter", lambda p: p.until("\n</parameter>\n"), f"""
        root ::= until-0
        {SPACE}
        until-0 ::= | [\\n] until-0-01 | [^\\n] until-0
        until-0-01 ::= | [\\n] until-0-01 | [<] until-0-02 | [^\\n<] until-0
        until-0-02 ::= | [\\n] until-0-01 | [/] until-0-03 | [^\\n/] until-0
        until-0-03 ::= | [\\n] until-0-01 | [p] until-0-04 | [^\\np] until-0
        until-0-04 ::= | [\\n] until-0-01 | [a] until-0-05 | [^\\na] until-0
        until-0-05 ::= | [\\n] until-0-01 | [r] until-0-06 | [^\\nr] until-0
        until-0-06 ::= | [\\n] until-0-01 | [a] until-0-07 | [^\\na] until-0
        until-0-07 ::= | [\\n] until-0-01 | [m] until-0-08 | [^\\nm] until-0
        until-0-08 ::= | [\\n] until-0-01 | [e] until-0-09 | [^\\ne] until-0
        until-0-09 ::= | [\\n] until-0-01 | [t] until-0-10 | [^\\nt] until-0
        until-0-10 ::= | [\\n] until-0-01 | [e] until-0-11 | [^\\ne] until-0
        until-0-11 ::= | [\\n] until-0-01 | [r] until-0-12 | [^\\nr] until-0
        until-0-12 ::= | [\\n] until-0-01 | [>] until-0-13 | [^\\n>] until-0
        until-0-13 ::= | [^\\n] until-0
    """),
    Case("until grammar unicode delimiter", lambda p: p.until("<\uff5cDSML\uff5c"), f"""
        root ::= until-0
        {SPACE}
        until-0 ::= | [<] until-0-01 | [^<] until-0
        until-0-01 ::= | [<] until-0-01 | [\\uFF5C] until-0-02 | [^<\\uFF5C] until-0
        until-0-02 ::= | [<] until-0-01 | [D] until-0-03 | [^<D] until-0
        until-0-03 ::= | [<] until-0-01 | [S] until-0-04 | [^<S] until-0
        until-0-04 ::= | [<] until-0-01 | [M] until-0-05 | [^<M] until-0
        until-0-05 ::= | [<] until-0-01 | [L] until-0-06 | [^<L] until-0
        until-0-06 ::= | [<] until-0-01 | [^<\\uFF5C] until-0
    """),
    Case("until grammar multiple delimiters", lambda p: p.until_one_of(["ab", "cd", "ef"]), f"""
        root ::= until-0
        {SPACE}
        until-0 ::= | [a] until-0-01 | [c] until-0-03 | [e] until-0-05 | [^ace] until-0
        until-0-01 ::= | [a] until-0-01 | [c] until-0-03 | [e] until-0-05 | [^abce] until-0
        until-0-03 ::= | [a] until-0-01 | [c] until-0-03 | [e] until-0-05 | [^acde] until-0
        until-0-05 ::= | [a] until-0-01 | [c] until-0-03 | [e] until-0-05 | [^acef] until-0
    """),
    Case("ac grammar", lambda p: p.ac(p.until("</tag>") + p.literal("</tag>"), "</tag>"), f"""
        ac-3 ::= [<] ac-3-01 | [^<] ac-3
        ac-3-01 ::= [<] ac-3-01 | [/] ac-3-02 | [^/<] ac-3
        ac-3-02 ::= [<] ac-3-01 | [t] ac-3-03 | [^<t] ac-3
        ac-3-03 ::= [<] ac-3-01 | [a] ac-3-04 | [^<a] ac-3
        ac-3-04 ::= [<] ac-3-01 | [g] ac-3-05 | [^<g] ac-3
        ac-3-05 ::= [>] | [<] ac-3-01 | [^<>] ac-3
        root ::= ac-3
        {SPACE}
    """),
    Case("ac grammar terminates at first delimiter",
         lambda p: p.ac(p.until("\n</parameter>\n") + p.literal("\n</parameter>\n"), "\n</parameter>\n"), f"""
        ac-3 ::= [\\n] ac-3-01 | [^\\n] ac-3
        ac-3-01 ::= [\\n] ac-3-01 | [<] ac-3-02 | [^\\n<] ac-3
        ac-3-02 ::= [\\n] ac-3-01 | [/] ac-3-03 | [^\\n/] ac-3
        ac-3-03 ::= [\\n] ac-3-01 | [p] ac-3-04 | [^\\np] ac-3
        ac-3-04 ::= [\\n] ac-3-01 | [a] ac-3-05 | [^\\na] ac-3
        ac-3-05 ::= [\\n] ac-3-01 | [r] ac-3-06 | [^\\nr] ac-3
        ac-3-06 ::= [\\n] ac-3-01 | [a] ac-3-07 | [^\\na] ac-3
        ac-3-07 ::= [\\n] ac-3-01 | [m] ac-3-08 | [^\\nm] ac-3
        ac-3-08 ::= [\\n] ac-3-01 | [e] ac-3-09 | [^\\ne] ac-3
        ac-3-09 ::= [\\n] ac-3-01 | [t] ac-3-10 | [^\\nt] ac-3
        ac-3-10 ::= [\\n] ac-3-01 | [e] ac-3-11 | [^\\ne] ac-3
        ac-3-11 ::= [\\n] ac-3-01 | [r] ac-3-12 | [^\\nr] ac-3
        ac-3-12 ::= [\\n] ac-3-01 | [>] ac-3-13 | [^\\n>] ac-3
        ac-3-13 ::= [\\n] | [^\\n] ac-3
        root ::= ac-3
        {SPACE}
    """),
    Case("ac grammar multiple delimiters", lambda p: p.ac(p.eps(), ["ab", "cd", "ef"]), f"""
        ac-1 ::= [a] ac-1-01 | [c] ac-1-03 | [e] ac-1-05 | [^ace] ac-1
        ac-1-01 ::= [b] | [a] ac-1-01 | [c] ac-1-03 | [e] ac-1-05 | [^abce] ac-1
        ac-1-03 ::= [d] | [a] ac-1-01 | [c] ac-1-03 | [e] ac-1-05 | [^acde] ac-1
        ac-1-05 ::= [f] | [a] ac-1-01 | [c] ac-1-03 | [e] ac-1-05 | [^acef] ac-1
        root ::= ac-1
        {SPACE}
    """),
    Case("complex expressions with parentheses", lambda p: p.one_or_more(p.literal("a") | p.literal("b")), f"""
        root ::= ("a" | "b")+
        {SPACE}
    """),
    Case("rule references", _rule_references, f"""
        digit ::= [0-9]
        root ::= digit+
        {SPACE}
    """),
    Case("escaping in literals", lambda p: p.literal("hello\nworld\n!"), f"""
        root ::= "hello\\nworld\\n!"
        {SPACE}
    """),
    Case("operator<< (whitespace insertion)", lambda p: p.literal("hello") << p.literal("world"), f"""
        root ::= "hello" space "world"
        {SPACE}
    """),
    Case("emit only reachable rules", _reachable, f"""
        child ::= " world"
        root ::= "hello" child
        {SPACE}
    """),
    Case("tagged choice inside sequence gets parenthesized",
         lambda p: p.literal("a") + p.tag("t", p.literal("b") | p.literal("c")), f"""
        root ::= "a" ("b" | "c")
        {SPACE}
    """),
    Case("tagged sequence inside choice gets parenthesized",
         lambda p: p.tag("t", p.literal("a") + p.literal("b")) | p.literal("c"), f"""
        root ::= "a" "b" | "c"
        {SPACE}
    """),
    Case("atomic choice inside repetition gets parenthesized",
         lambda p: p.one_or_more(p.atomic(p.literal("a") | p.literal("b"))), f"""
        root ::= ("a" | "b")+
        {SPACE}
    """),
    Case("silent parser emits nothing in gbnf", lambda p: p.literal("hello") + p.gbnf(p.literal("world"), ""), f"""
        root ::= "hello"
        {SPACE}
    """),
    Case("silent choice inside sequence emits nothing",
         lambda p: p.literal("a") + p.gbnf(p.literal("b") | p.literal("c"), "") + p.literal("d"), f"""
        root ::= "a" "d"
        {SPACE}
    """),
    Case("silent wrapped in tag emits nothing", lambda p: p.literal("a") + p.tag("t", p.gbnf(p.literal("b"), "")), f"""
        root ::= "a"
        {SPACE}
    """),
    Case("gbnf parser emits custom grammar", lambda p: p.literal("a") + p.gbnf(p.literal("b"), "[a-z]+"), f"""
        root ::= "a" [a-z]+
        {SPACE}
    """),
    Case("nested transparent wrappers get parenthesized",
         lambda p: p.literal("x") + p.tag("outer", p.atomic(p.literal("a") | p.literal("b"))), f"""
        root ::= "x" ("a" | "b")
        {SPACE}
    """),
    Case("emit only trigger rules (and references)", _trigger_rules, f"""
        root ::= rule-1
        rule-1 ::= "a" rule-2
        rule-2 ::= "b" rule-3
        rule-3 ::= "c" rule-4
        rule-4 ::= "d"
        {SPACE}
    """),
    Case("emit only trigger rules (and references) [lazy]", _trigger_rules, f"""
        root ::= rule-2 | rule-4
        rule-2 ::= "b" rule-3
        rule-3 ::= "c" rule-4
        rule-4 ::= "d"
        {SPACE}
    """, lazy=True),
]

# The C++ file has 28 t.test blocks; the trigger-rule block checks two grammars (plain and lazy).
assert len(CASES) == 29


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_cpp_gbnf_generation(case: Case) -> None:
    arena = build_peg_parser(case.build)
    assert trim_leading_space(arena_to_gbnf(arena, lazy=case.lazy)) == trim_leading_space(case.expected)


# --- further behaviour common/peg-parser.cpp fixes (build_grammar of each node); not in the C++ test file -------


def _rhs(arena: Arena, name: str = "root", lazy: bool = False) -> str:
    for line in arena_to_gbnf(arena, lazy=lazy).splitlines():
        if line.startswith(name + " ::= "):
            return line[len(name) + 5:]
        if line == name + " ::= ":
            return ""
    raise AssertionError(f"no rule {name}")


def test_repetition_and_chars_suffixes() -> None:
    forms = [((0, 1), "?"), ((0, -1), "*"), ((1, -1), "+"), ((3, -1), "{3,}"), ((1, 1), ""), ((4, 4), "{4}"),
             ((2, 5), "{2,5}"), ((0, 0), "{0}")]
    for (lo, hi), suffix in forms:
        assert _rhs(build_peg_parser(lambda p, lo=lo, hi=hi: p.repeat(p.literal("a"), lo, hi))) == '"a"' + suffix
        assert _rhs(build_peg_parser(lambda p, lo=lo, hi=hi: p.chars("[0-9]", lo, hi))) == "[0-9]" + suffix
    # the pattern is printed as written, even when it is not a valid GBNF class
    assert _rhs(build_peg_parser(lambda p: p.chars("a-z"))) == "a-z+"
    assert _rhs(build_peg_parser(lambda p: p.repeat(p.literal("a") + p.literal("b"), 2, 3))) == '("a" "b"){2,3}'


def test_leaf_renderings() -> None:
    assert _rhs(build_peg_parser(lambda p: p.any() + p.space() + p.rest())) == ". space .*"
    assert _rhs(build_peg_parser(lambda p: p.string_content('"'))) == \
        '( [^"\\\\] | "\\\\" ( ["\\\\/ bfnrt] | "u" [0-9a-fA-F]{4} ) )*'
    assert _rhs(build_peg_parser(lambda p: p.string_content("'"))) == \
        "( [^'\\\\] | \"\\\\\" ( ['\\\\/ bfnrt] | \"u\" [0-9a-fA-F]{4} ) )*"
    # lookaheads, start and end emit nothing, and nothing is not parenthesised
    assert _rhs(build_peg_parser(lambda p: p.start() + p.peek(p.literal("x")) + p.literal("a")
                                 + p.negate(p.literal("b") | p.literal("c")) + p.end())) == '"a"'
    # an empty literal is emitted as a pair of quotes
    assert _rhs(build_peg_parser(lambda p: p.literal("") + p.literal("a"))) == '"" "a"'
    # literal escaping: only CR, LF, quote and backslash
    assert _rhs(build_peg_parser(lambda p: p.literal('a"b\\c\r\td\u00e9'))) == '"a\\"b\\\\c\\r\td\u00e9"'
    # a choice alternative is parenthesised, a sequence alternative is not; the separator is written only
    # after some text, so a leading empty alternative vanishes and a later one leaves an empty alternative
    assert _rhs(build_peg_parser(lambda p: p.choice([p.eps(), p.literal("a") + p.literal("b"), p.eps(),
                                                     p.tag("t", p.literal("c") | p.literal("d"))]))) == \
        '"a" "b" |  | ("c" | "d")'


def test_char_class_escaping() -> None:
    cases = {ord("-"): "\\-", ord("]"): "\\]", ord("["): "\\[", ord("\\"): "\\\\", 10: "\\n", 9: "\\t", 13: "\\r",
             ord("a"): "a", ord(" "): " ", ord("^"): "^", 0: "\\x00", 0x7F: "\\x7F", 0xE9: "\\xE9",
             0xFF5C: "\\uFF5C", 0x1F600: "\\U0001F600"}
    for cp, text in cases.items():
        assert escape_char_class(cp) == text
    rhs = _rhs(build_peg_parser(lambda p: p.until("]-\\")), "until-0")
    assert rhs == "| [\\]] until-0-01 | [^\\]] until-0"


def test_empty_delimiter_emits_an_empty_string() -> None:
    # Deliberate deviation: the C++ emits `x ::= |`, which llama.cpp's grammar parser cannot load when another
    # rule follows (tests/gbnf/test_peg_gbnf_oracle.py checks the loaded grammar); `""` matches the same.
    assert _rhs(build_peg_parser(lambda p: p.until("")), "until-0") == '""'
    assert _rhs(build_peg_parser(lambda p: p.ac(p.eps(), [""])), "ac-1") == '""'


def test_lazy_without_triggers_has_empty_root() -> None:
    arena = build_peg_parser(lambda p: p.rule("a", p.literal("a")))
    assert arena_to_gbnf(arena, lazy=True).splitlines()[0] == "root ::= "


def test_reachability_descends_into_lookahead_and_gbnf_children() -> None:
    def build(p: Builder) -> P:
        hidden = p.gbnf(p.rule("inside-gbnf", p.literal("g")), "")
        look = p.negate(p.rule("inside-not", p.literal("n")))
        return p.literal("a") + hidden + look

    names = [line.split(" ::= ")[0] for line in arena_to_gbnf(build_peg_parser(build)).splitlines()]
    assert names == ["inside-gbnf", "inside-not", "root", "space"]


def test_lazy_trigger_names_sorted_and_reachable() -> None:
    def build(p: Builder) -> P:
        shared = p.rule("shared", p.literal("s"))
        p.trigger_rule("zeta", p.literal("z") + shared)
        p.trigger_rule("alpha", p.literal("a"))
        p.rule("unused", p.literal("u"))
        return p.eps()

    text = arena_to_gbnf(build_peg_parser(build), lazy=True)
    assert text.splitlines() == ['alpha ::= "a"', "root ::= alpha | zeta", 'shared ::= "s"', SPACE,
                                 'zeta ::= "z" shared']


def test_emit_rules_into_a_shared_builder() -> None:
    from autoparser.gbnf.from_schema import build_grammar

    arena = build_peg_parser(lambda p: p.rule("thing", p.literal("x")) + p.until("<"))

    def cb(builder: object) -> None:
        builder.add_rule("extra", '"e"')  # type: ignore[attr-defined]
        emit_rules(arena, builder, False)  # type: ignore[arg-type]

    lines = build_grammar(cb).splitlines()
    assert lines == ['extra ::= "e"', "root ::= thing until-3", SPACE, 'thing ::= "x"',
                     "until-3 ::= | [^<] until-3"]


def test_missing_rule_is_a_grammar_error() -> None:
    from autoparser.peg import nodes as N

    arena = Arena([N.Ref("nowhere")], {}, 0)
    with pytest.raises(GrammarError, match="Rule not found: nowhere"):
        arena_to_gbnf(arena)


def test_rule_table_walked_in_libstdcxx_order() -> None:
    # Expected order printed by g++ 12 / libstdc++ for std::unordered_map<std::string, size_t> filled in this
    # order (20 keys, so it also crosses the 13 -> 29 bucket rehash): the C++ arena's rule table.
    names = ["json-value", "json-object", "json-string", "json-array", "json-number", "json-bool", "json-null",
             "tool-call", "tool-get-weather", "tool-get-weather-arg-city", "tool-get-weather-arg-days",
             "until-suffix", "response-format", "double-quoted-string", "single-quoted-string", "quoted-string",
             "python-value", "python-dict", "python-array", "python-string"]
    expected = ["python-string", "python-dict", "double-quoted-string", "tool-get-weather",
                "tool-get-weather-arg-days", "json-value", "json-object", "tool-get-weather-arg-city", "json-string",
                "python-array", "quoted-string", "json-array", "json-number", "json-null", "single-quoted-string",
                "json-bool", "tool-call", "until-suffix", "python-value", "response-format"]
    assert cpp_rule_table_order(names) == expected
    assert cpp_rule_table_order([]) == []


def test_rules_reach_the_builder_in_rule_table_order() -> None:
    calls: list[str] = []

    class Recorder:
        def add_rule(self, name: str, rhs: str) -> str:
            calls.append(name)
            return name

        def add_schema(self, name: str, node: object) -> str:  # pragma: no cover - no schema here
            raise AssertionError(name)

    names = ["json-value", "tool-call", "quoted-string", "python-dict"]
    arena = build_peg_parser(lambda p: p.sequence([p.rule(n, p.literal(n)) for n in names]))
    emit_rules(arena, Recorder(), False)
    assert calls == [*cpp_rule_table_order(names), "root"]


def test_no_root_is_a_grammar_error_unless_lazy() -> None:
    b = Builder()
    b.trigger_rule("call", b.literal("x"))
    arena = b.build()
    with pytest.raises(GrammarError, match="No root parser set"):
        arena_to_gbnf(arena)
    assert arena_to_gbnf(arena, lazy=True).splitlines() == ['call ::= "x"', "root ::= call", SPACE]
