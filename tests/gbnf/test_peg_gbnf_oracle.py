"""The emitted GBNF, run in llama.cpp's own grammar engine: it compiles, and it accepts what the PEG accepts.

A GBNF grammar from a PEG over-approximates it (lookaheads vanish, `gbnf(p, "")` hides parts), so the
property is one-way: a string the PEG parser matches in full is accepted by the grammar, and each of its
prefixes is a viable prefix. Where the two languages differ by design (hidden parts, `ac` wrappers around a
child that does not end at the delimiter) the samples are grammar-only, and strings the grammar must reject
are checked too.

A grammar llama.cpp cannot compile fails its case unless tests/data/ratchet/peg_gbnf.json names the case with
the reason (for example the `x ::= |` quirk: llama.cpp reads the next line as part of an empty-bodied rule).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from test_peg_to_gbnf import CASES

from autoparser.chat.builder import ChatBuilder
from autoparser.gbnf.from_peg import arena_to_gbnf
from autoparser.peg import Arena, Builder, P, build_peg_parser
from autoparser.testing.ratchet import Ratchet

pytestmark = pytest.mark.oracle

RATCHET = Ratchet(Path(__file__).parent.parent / "data" / "ratchet" / "peg_gbnf.json")


def peg_accepts(arena: Arena, text: str, rule: str | None = None) -> bool:
    """The PEG parser (root, or a named rule) matches all of `text` on complete input."""
    res = arena.parse(text, parser=None if rule is None else arena.rules[rule])
    return res.success and res.end == len(text)


@dataclass(frozen=True)
class OracleCase:
    id: str
    build: Callable[[Builder], P]
    both: tuple[str, ...] = ()  # matched in full by the PEG (root, or `rule`) and accepted by the grammar
    grammar_only: tuple[str, ...] = ()  # accepted by the grammar (the PEG language differs by design)
    rejected: tuple[str, ...] = ()  # the grammar must reject these
    lazy: bool = False
    rule: str | None = None  # in lazy cases the PEG side is checked per trigger rule: "rule=text" in `both`
    builder: type[Builder] = Builder


# Samples for every case of the C++ test file, keyed by case id.
CPP_SAMPLES: dict[str, dict[str, tuple[str, ...]]] = {
    "literal grammar generation": {"both": ("hello",), "rejected": ("hell", "hello!")},
    "char class grammar": {"both": ("a", "q", "z"), "rejected": ("", "A", "ab")},
    "sequence grammar": {"both": ("hello world",), "rejected": ("helloworld",)},
    "choice grammar": {"both": ("cat", "dog"), "rejected": ("cow",)},
    "one_or_more grammar": {"both": ("a", "aaaa"), "rejected": ("",)},
    "zero_or_more grammar": {"both": ("", "a", "aaa"), "rejected": ("b",)},
    "optional grammar": {"both": ("hello", "hello world"), "rejected": ("hello worl",)},
    "until grammar": {"both": ("", "abc", "<a>", "x</ta>y</tagz", "</ttag>"), "rejected": ("a</tag>",)},
    "until grammar overlapping delimiter": {"both": ("text\n</parameter>x", "\n\n</param>\n<a"),
                                            "rejected": ("a\n</parameter>\n",)},
    "until grammar unicode delimiter": {"both": ("x<\uff5cDSML>y", "<<\uff5cDSx\uff5c"),
                                        "rejected": ("a<\uff5cDSML\uff5c",)},
    "until grammar multiple delimiters": {"both": ("aceg", "fedcbaz", ""), "rejected": ("xcd", "efx")},
    "ac grammar": {"both": ("</tag>", "abc</tag>", "<</tag>", "</ta</tag>"),
                   "rejected": ("abc", "</tag></tag>", "</tag>x")},
    "ac grammar terminates at first delimiter": {"both": ("x\n</parameter>\n", "\n\n</parameter>\n"),
                                                 "rejected": ("x\n</parameter>\nmore\n</parameter>\n",)},
    # the PEG child is epsilon: only the grammar consumes up to the first delimiter
    "ac grammar multiple delimiters": {"grammar_only": ("ab", "xxcd", "aef", "caab"), "rejected": ("", "abab", "x")},
    "complex expressions with parentheses": {"both": ("a", "abba"), "rejected": ("", "abc")},
    "rule references": {"both": ("0", "123"), "rejected": ("", "1a")},
    "escaping in literals": {"both": ("hello\nworld\n!",), "rejected": ("hello\\nworld\\n!",)},
    "operator<< (whitespace insertion)": {"both": ("helloworld", "hello world", "hello\n\t world"),
                                          "rejected": ("hello\n\n\nworld",)},
    "emit only reachable rules": {"both": ("hello world",), "rejected": ("orphan",)},
    "tagged choice inside sequence gets parenthesized": {"both": ("ab", "ac"), "rejected": ("a",)},
    "tagged sequence inside choice gets parenthesized": {"both": ("ab", "c"), "rejected": ("ac",)},
    "atomic choice inside repetition gets parenthesized": {"both": ("a", "abab"), "rejected": ("",)},
    "silent parser emits nothing in gbnf": {"grammar_only": ("hello",), "rejected": ("helloworld",)},
    "silent choice inside sequence emits nothing": {"grammar_only": ("ad",), "rejected": ("abd",)},
    "silent wrapped in tag emits nothing": {"grammar_only": ("a",), "rejected": ("ab",)},
    "gbnf parser emits custom grammar": {"both": ("ab",), "grammar_only": ("azzz",), "rejected": ("a", "aB")},
    "nested transparent wrappers get parenthesized": {"both": ("xa", "xb"), "rejected": ("x",)},
    "emit only trigger rules (and references)": {"both": ("abcd",), "rejected": ("bcd",)},
    "emit only trigger rules (and references) [lazy]": {"both": ("rule-2=bcd", "rule-4=d"),
                                                        "rejected": ("abcd", "bc")},
}


# --- further grammars: JSON, python values, tool calls, permutations -------------------------------------------

TOOL_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
               "required": ["city"]}


def _tool_calls(p: Builder) -> P:
    """Reasoning, content up to the first call, then calls: a schema-checked JSON call and a tagged one."""
    reasoning = p.optional(p.literal("<think>") + p.tag("reasoning", p.until("</think>")) + p.literal("</think>")
                           + p.space())
    content = p.tag("content", p.until("<tool_call>"))
    name = p.atomic(p.tag("tool-name", p.literal("get_weather")))
    json_call = p.rule("tool-get-weather", p.literal('{"name": "') + name + p.literal('", "arguments": ')
                       + p.tag("tool-args", p.schema(p.json(), "tool-get-weather-schema", TOOL_SCHEMA)) + "}")
    # an argument taken verbatim up to (and including) its closing tag, then free text under a raw string
    # schema, which delegates to its child
    text_arg = p.ac(p.tag("arg-value", p.until("</arg>")) + p.literal("</arg>"), "</arg>")
    note = p.schema(p.until("</note>"), "tool-note-text", {"type": "string"}, raw=True)
    tagged_call = p.rule("tool-note", p.literal("<note><arg>") + text_arg + note + p.literal("</note>"))
    call = p.trigger_rule("tool-call", p.literal("<tool_call>") + p.space() + (json_call | tagged_call) + p.space()
                          + p.literal("</tool_call>"))
    return reasoning + content + p.zero_or_more(call + p.space()) + p.end()


def _permute(p: Builder) -> P:
    assert isinstance(p, ChatBuilder)
    args = [p.rule(f"arg-{k}", p.literal(f"<{k}>") + p.until(f"</{k}>") + p.literal(f"</{k}>"))
            for k in ("a", "b", "c")]
    return p.literal("[") + p.permute("args", args) + p.literal("]")


def _safe_content(p: Builder) -> P:
    assert isinstance(p, ChatBuilder)
    call = p.rule("call", p.literal("<call>") + p.chars("[a-z]") + p.literal("</call>"))
    return p.tag_with_safe_content("chunk", "<call>", call) + p.end()


_PERMUTED = tuple("[" + "".join(f"<{k}>x{k}</{k}>" for k in order) + "]" for order in itertools.permutations("abc"))

EXTRA_CASES = [
    OracleCase("json value", lambda p: p.json(),
               both=("{}", "[]", '""', "0", "-0.5e+10", "true", "null", '{"a": [1, 2.5, "x\\"y"], "b": {}}',
                     '[ {"k" : "v\\u00e9"} , false ]', '"tab\there \\/ \\n"', '"\u00e9\U0001f600"'),
               rejected=("{", "[1,]", "'a'", "01", "nul")),
    OracleCase("python value", lambda p: p.python_value(),
               both=("{'a': 1}", "[1, 'x', None, True]", '{"k": [False, {}]} ', "''", "-3.25"),
               rejected=("{'a': 1", "[1 , 2]", "none")),
    OracleCase("tool calls", _tool_calls,
               both=("Hello", "<think>hmm</think>\nHi there",
                     '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>',
                     '<think>a</think> ok<tool_call>\n{"name": "get_weather", "arguments": {"city": "P", "days": 3}}'
                     "\n</tool_call>",
                     "<tool_call><note><arg>buy <b>milk</b> </arg</arg> and <i>more</i></note></tool_call>"),
               rejected=('<tool_call>{"name": "get_weather", "arguments": {"days": 3}}</tool_call>',
                         '<tool_call>{"name": "get_time", "arguments": {}}</tool_call>')),
    OracleCase("tool calls [lazy]", _tool_calls, lazy=True,
               both=('tool-call=<tool_call>{"name": "get_weather", "arguments": {"city": "Rome"}}</tool_call>',
                     "tool-call=<tool_call> <note><arg>x</arg></note> </tool_call>"),
               rejected=("Hello", "<tool_call><note><arg>x</note></tool_call>")),
    OracleCase("permute", _permute, both=_PERMUTED, rejected=("[]", "[<a>x</a>]", "[<a>x</a><a>x</a><b>x</b>]"),
               builder=ChatBuilder),
    OracleCase("tag with safe content", _safe_content, both=("", "plain text", "a<call>x</call>b<c", "<call>ab</call>"),
               builder=ChatBuilder),
    OracleCase("string content and chars", lambda p: p.one_or_more(p.double_quoted_string() | p.chars("[0-9]", 2, 3)
                                                                   | p.single_quoted_string()),
               both=('"a\\"b"', "'x\\'y'12", '123"\\u00e9"99', '"raw\ttab"'), rejected=("1", '"\\x"', "12a")),
    OracleCase("any and rest", lambda p: p.literal("<") + p.any() + p.literal(">") + p.rest(),
               both=("<a>", "<\u00e9>tail \n anything"), rejected=("<>",)),
    # An empty delimiter makes the automaton emit `ac-1 ::= |`, which llama.cpp cannot parse when another
    # rule follows it (see the ratchet).
    OracleCase("ac empty delimiter", lambda p: p.ac(p.eps(), [""]), grammar_only=("",)),
    OracleCase("until empty delimiter", lambda p: p.literal("a") + p.until(""), both=("a",)),
    # `space*`: llama.cpp reports left recursion for a repeated rule with an empty alternative (see the ratchet).
    OracleCase("zero_or_more of space", lambda p: p.literal("<") + p.zero_or_more(p.space()), both=("<", "< ")),
]


def _cpp_oracle_cases() -> list[OracleCase]:
    out = []
    for case in CASES:
        samples = CPP_SAMPLES[case.id]
        out.append(OracleCase(case.id, case.build, lazy=case.lazy, **samples))
    return out


ORACLE_CASES = _cpp_oracle_cases() + EXTRA_CASES


@pytest.fixture(scope="module")
def oracle() -> Any:
    """`LlamaGrammar` (what the plugin's `gbnf_oracle` fixture gives), once per module for hypothesis' sake."""
    from autoparser.testing.gbnf_oracle import LlamaGrammar, require_oracle

    require_oracle()
    return LlamaGrammar


def test_every_cpp_case_has_samples() -> None:
    assert set(CPP_SAMPLES) == {c.id for c in CASES}


def test_ratchet_names_existing_cases() -> None:
    RATCHET.check_known(c.id for c in ORACLE_CASES)


def _build(case: OracleCase) -> Arena:
    b = case.builder()
    return b.build(case.build(b))


def _check_case(oracle: Any, case: OracleCase, capfd: pytest.CaptureFixture[str]) -> str | None:
    """None if every check passes, else a report of what failed."""
    arena = _build(case)
    gbnf = arena_to_gbnf(arena, lazy=case.lazy)
    capfd.readouterr()
    try:
        grammar = oracle(gbnf)
    except Exception as e:
        return f"llama.cpp cannot compile the grammar: {e}\n{capfd.readouterr().err}\n--- grammar ---\n{gbnf}"
    problems: list[str] = []
    for sample in case.both:
        rule, text = (sample.split("=", 1) if case.lazy else (None, sample))
        if not peg_accepts(arena, text, rule):
            problems.append(f"sample is not matched by the PEG ({rule or 'root'}): {text!r}")
    for text in [s.split("=", 1)[1] if case.lazy else s for s in case.both] + list(case.grammar_only):
        if not grammar.accepts(text):
            problems.append(f"grammar rejects {text!r}")
        bad = [i for i in range(len(text)) if not grammar.viable_prefix(text[:i])]
        if bad:
            problems.append(f"prefix {text[:bad[0]]!r} of {text!r} is not viable")
    problems.extend(f"grammar accepts {text!r}" for text in case.rejected if grammar.accepts(text))
    if problems:
        return "\n".join(problems) + "\n--- grammar ---\n" + gbnf
    return None


@pytest.mark.parametrize("case", ORACLE_CASES, ids=[c.id for c in ORACLE_CASES])
def test_grammar_in_llama_cpp(case: OracleCase, oracle: Any, capfd: pytest.CaptureFixture[str]) -> None:
    RATCHET.check(case.id, _check_case(oracle, case, capfd))


# --- hypothesis: JSON values the PEG parses are in the grammar --------------------------------------------------

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**12, 10**12) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8)

_JSON_ARENA = build_peg_parser(lambda p: p.json())
# The engine raises the recursion limit on its first parse; hypothesis warns (an error here) when that happens
# inside a test, so let it happen at import.
_JSON_ARENA.parse("0")

SETTINGS = settings(max_examples=120, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@pytest.fixture(scope="module")
def json_grammar(oracle: Any) -> Any:
    return oracle(arena_to_gbnf(_JSON_ARENA))


@SETTINGS
@given(value=_json_values, ascii_only=st.booleans(), compact=st.booleans())
def test_json_documents_accepted(json_grammar: Any, value: Any, ascii_only: bool, compact: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only, separators=(",", ":") if compact else None)
    assert peg_accepts(_JSON_ARENA, text)
    assert json_grammar.accepts(text), text
    assert all(json_grammar.viable_prefix(text[:i]) for i in range(0, len(text), max(1, len(text) // 12))), text


# --- hypothesis: random small grammars and strings drawn from them -------------------------------------------

# A spec is a small tree: ("lit", s) | ("chars", cls, lo, hi) | ("seq", [..]) | ("alt", [..]) | ("rep", x, lo, hi)
# | ("until", d) | ("ac", d) | ("rule", x) | ("tag", x) | ("atomic", x) | ("space",) | ("string",)
Spec = tuple[Any, ...]

_ALPHABET = "ab<>/x"
_CLASSES = {"[a-c]": "abc", "[0-9]": "0123456789", "[^<>]": "xyz /a"}
_DELIMS = ["</t>", "<<", "ab", "\u00e9>"]

_leaf: st.SearchStrategy[Spec] = st.one_of(
    st.builds(lambda s: ("lit", s), st.text(_ALPHABET, min_size=1, max_size=3)),
    st.builds(lambda c, lo, extra: ("chars", c, lo, -1 if extra < 0 else lo + extra),
              st.sampled_from(sorted(_CLASSES)), st.integers(0, 2), st.integers(-1, 2)),
    st.builds(lambda d: ("until", d), st.sampled_from(_DELIMS)),
    st.builds(lambda d: ("ac", d), st.sampled_from(_DELIMS)),
    st.just(("space",)),
    st.just(("string",)),
)


def _nullable(spec: Spec) -> bool:
    kind = spec[0]
    if kind in ("lit", "until", "ac", "string"):
        return False
    if kind == "chars":
        return bool(spec[2] == 0)
    if kind == "seq":
        return all(_nullable(s) for s in spec[1])
    if kind == "alt":
        return any(_nullable(s) for s in spec[1])
    if kind == "rep":
        return bool(spec[2] == 0) or _nullable(spec[1])
    if kind == "space":
        return True
    return _nullable(spec[1])


def _extend(inner: st.SearchStrategy[Spec]) -> st.SearchStrategy[Spec]:
    # Repetitions only wrap what cannot match empty: llama.cpp rejects some repeated nullable rules as left
    # recursive (case "zero_or_more of space" in the ratchet), which the C++ emitter does not avoid either.
    return st.one_of(
        st.builds(lambda xs: ("seq", xs), st.lists(inner, min_size=2, max_size=3)),
        st.builds(lambda xs: ("alt", xs), st.lists(inner, min_size=2, max_size=3)),
        st.builds(lambda x, lo, hi: ("rep", x, lo, hi), inner.filter(lambda x: not _nullable(x)), st.integers(0, 1),
                  st.sampled_from([1, 2, -1])),
        st.builds(lambda x: ("rule", x), inner),
        st.builds(lambda x: ("tag", x), inner),
        st.builds(lambda x: ("atomic", x), inner),
    )


_specs = _extend(_extend(st.recursive(_leaf, _extend, max_leaves=6)))  # composite at the top two levels


def _to_parser(p: Builder, spec: Spec, counter: list[int]) -> P:
    kind = spec[0]
    if kind == "lit":
        return p.literal(spec[1])
    if kind == "chars":
        return p.chars(spec[1], spec[2], spec[3])
    if kind == "seq":
        return p.sequence([_to_parser(p, s, counter) for s in spec[1]])
    if kind == "alt":
        return p.choice([_to_parser(p, s, counter) for s in spec[1]])
    if kind == "rep":
        return p.repeat(_to_parser(p, spec[1], counter), spec[2], max(spec[2], spec[3]) if spec[3] >= 0 else -1)
    if kind == "until":
        return p.until(spec[1]) + p.literal(spec[1])
    if kind == "ac":
        return p.ac(p.until(spec[1]) + p.literal(spec[1]), spec[1])
    if kind == "rule":
        counter[0] += 1
        return p.rule(f"r{counter[0]}", _to_parser(p, spec[1], counter))
    if kind == "tag":
        return p.tag("t", _to_parser(p, spec[1], counter))
    if kind == "atomic":
        return p.atomic(_to_parser(p, spec[1], counter))
    if kind == "space":
        return p.space()
    assert kind == "string"
    return p.double_quoted_string()


def _sample(data: st.DataObject, spec: Spec) -> str:
    kind = spec[0]
    if kind == "lit":
        return str(spec[1])
    if kind == "chars":
        lo, hi = spec[2], spec[3]
        n = data.draw(st.integers(lo, lo + 3 if hi < 0 else hi))
        return "".join(data.draw(st.sampled_from(_CLASSES[spec[1]])) for _ in range(n))
    if kind == "seq":
        return "".join(_sample(data, s) for s in spec[1])
    if kind == "alt":
        return _sample(data, data.draw(st.sampled_from(spec[1])))
    if kind == "rep":
        lo, hi = spec[2], spec[3]
        n = data.draw(st.integers(lo, lo + 2 if hi < 0 else max(lo, hi)))
        return "".join(_sample(data, spec[1]) for _ in range(n))
    if kind in ("until", "ac"):
        return data.draw(st.text(_ALPHABET + "\u00e9t", max_size=5)) + spec[1]
    if kind in ("rule", "tag", "atomic"):
        return _sample(data, spec[1])
    if kind == "space":
        return data.draw(st.sampled_from(["", " ", "\n", "\n\n  \t"]))
    assert kind == "string"
    return '"' + "".join(data.draw(st.lists(st.sampled_from(['a', '\\"', "\\\\", "\\n", "\\u00e9", "\u00e9", "<"]),
                                            max_size=4))) + '"'


@SETTINGS
@given(spec=_specs, data=st.data())
def test_random_grammars(oracle: Any, spec: Spec, data: st.DataObject) -> None:
    counter = [0]
    arena = build_peg_parser(lambda p: _to_parser(p, spec, counter))
    gbnf = arena_to_gbnf(arena)
    grammar = oracle(gbnf)  # every random grammar must compile
    text = _sample(data, spec)
    assume(peg_accepts(arena, text))
    assert grammar.accepts(text), f"{text!r}\n{gbnf}"
    bad = [i for i in range(len(text)) if not grammar.viable_prefix(text[:i])]
    assert not bad, f"prefix {text[:bad[0]]!r} of {text!r} not viable\n{gbnf}"

