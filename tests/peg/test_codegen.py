"""Generated code (autoparser.peg.codegen) against the closures, and when evaluate.py switches to it.

tests/peg/test_properties.py compares both on random grammars; here on the parser of every C++ chat case (every
prefix of the case's output, both modes), on grammars built to hit CPython's compiler limits, and the tiering:
closures first, one compiled function per structure once grammars of that structure are hot.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from autoparser import generate
from autoparser.chat.mapper import output_parser
from autoparser.corpus import Corpus
from autoparser.corpus.roundtrip import QUESTION_WEATHER, WEATHER_TOOL
from autoparser.errors import AutoparserError, GrammarError, ParseError
from autoparser.peg import Arena, Builder, P, build_peg_parser, evaluate
from autoparser.peg import nodes as N
from autoparser.peg.codegen import compile_entry, compile_source
from autoparser.peg.engine import MAX_RULE_DEPTH, Ctx
from autoparser.testing.chat_cases import ChatCases
from autoparser.testing.codegen import CodegenCheck

CHAT = ChatCases(Path(__file__).resolve().parent.parent / "data")


def _is_generated(fn: Any) -> bool:
    return str(fn.__code__.co_filename).startswith("<peg arena")


def _prefix_ends(n: int) -> list[int]:
    # every prefix of short outputs; of long ones a stride plus every prefix near the end
    return list(range(n + 1)) if n <= 300 else sorted(set(range(0, n, 7)) | set(range(n - 40, n + 1)))


@pytest.mark.parametrize("index", range(len(CHAT.cases)), ids=CHAT.ids)
def test_chat_case_parser_agrees_with_closures(index: int) -> None:
    case = CHAT.cases[index]
    params = CHAT.params_or_xfail(index)
    arena = output_parser(params.parser)
    check = CodegenCheck(arena, arena.root)
    text = params.generation_prompt + case["input"]
    for k in _prefix_ends(len(text)):
        for partial in (True, False):
            problem = check.mismatch(text[:k], partial=partial)
            assert problem is None, problem


# --- CPython's limits: 20 nested loops per function, 100 indentation levels ---------------------------------------

def _nested(b: Builder, depth: int) -> P:
    inner = b.literal("x")
    for level in range(depth):
        # a sequence (one loop) inside a repetition (another) inside a choice (a third), per level
        inner = b.choice([b.literal(f"<{level}>") + b.zero_or_more(inner + b.space()), b.literal(f"#{level}")])
    return inner


def test_deep_nesting_compiles_into_several_functions() -> None:
    b = Builder()
    arena = b.build(_nested(b, 40) + b.end())
    source, _ = compile_source(arena, arena.root)
    assert source.count("\ndef ") >= 2  # split, not refused
    text = "".join(f"<{level}>" for level in reversed(range(40))) + "x"
    check = CodegenCheck(arena, arena.root)
    for k in range(len(text) + 1):
        for partial in (True, False):
            assert check.mismatch(text[:k], partial=partial) is None
    assert arena.parse(text).success


def test_a_long_sequence_compiles() -> None:
    words = [f"w{i} " for i in range(600)]
    arena = build_peg_parser(lambda b: b.sequence([b.literal(w) for w in words]) + b.end())
    check = CodegenCheck(arena, arena.root)
    text = "".join(words)
    for k in (0, 1, 5, len(text) // 2, len(text) - 1, len(text)):
        for partial in (True, False):
            assert check.mismatch(text[:k], partial=partial) is None


def test_corpus_tool_grammars_compile() -> None:
    # The round-trip scenarios' one-call request on every fifth corpus template: codegen must not fall back.
    corpus = Corpus.load()
    request = {"messages": [{"role": "user", "content": QUESTION_WEATHER}], "tools": [WEATHER_TOOL]}
    compiled = 0
    for name in corpus.names()[::5]:
        try:
            params = generate(corpus.by_name(name).read_text(), request)
        except AutoparserError:
            continue
        arena = output_parser(params.parser)
        compile_entry(arena, arena.root)  # raises where CPython's compiler refuses the source
        compiled += 1
    assert compiled >= 100


# --- errors come out of generated code as out of the closures -------------------------------------------------

def test_missing_rule_raises_the_same_error() -> None:
    # The builder and load() refuse dangling references; an arena assembled by hand can still hold one.
    arena = Arena([N.Literal("a"), N.Ref("nowhere"), N.Sequence((0, 1))], {}, 2)
    fn = compile_entry(arena, arena.root)
    assert fn(Ctx("b", False), 0)[0] == 0  # never reached
    with pytest.raises(GrammarError, match="Rule not found: nowhere"):
        fn(Ctx("ab", False), 0)


def test_depth_guard_holds_in_generated_code() -> None:
    arena = build_peg_parser(lambda b: b.json() + b.end())
    with evaluate.tiering(key_after=1, compile_after=1):
        assert _is_generated(evaluate.entry_function(arena, arena.root))
        deep = "[" * (MAX_RULE_DEPTH + 5)
        with pytest.raises(ParseError, match=f"nested more than {MAX_RULE_DEPTH} levels"):
            arena.parse(deep, partial=True)
        assert arena.parse("[" * 100 + "]" * 100).success
    assert (evaluate.KEY_AFTER, evaluate.COMPILE_AFTER) == (8, 256)  # restored


# --- tiering ------------------------------------------------------------------------------------------------

def _weather_arena() -> Arena:
    return build_peg_parser(lambda b: b.literal("<call>") + b.json() + b.literal("</call>") + b.end())


@pytest.fixture
def small_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(evaluate, "KEY_AFTER", 2)
    monkeypatch.setattr(evaluate, "COMPILE_AFTER", 5)
    monkeypatch.setattr(evaluate, "_structures", type(evaluate._structures)())


@pytest.mark.usefixtures("small_thresholds")
def test_closures_first_then_one_compiled_function_per_structure() -> None:
    first, second = _weather_arena(), _weather_arena()
    text = '<call>{"city": "Paris"}</call>'
    kinds = []
    for arena in (first, first, first, second, second, second, first):
        kinds.append(_is_generated(evaluate.entry_function(arena, arena.root)))
        assert arena.parse(text).success
    # Each turn asks twice (entry_function above, arena.parse below). An arena joins its structure on its 2nd
    # ask; the structure's 5th ask compiles (the first arena's 3rd parse); the second arena, asking for the
    # first time, is on its closures, and from its 2nd ask on shares the compiled function.
    assert kinds == [False, False, False, False, True, True, True]
    assert evaluate.entry_function(first, first.root) is evaluate.entry_function(second, second.root)
    assert len(evaluate._structures) == 1


@pytest.mark.usefixtures("small_thresholds")
def test_the_structure_table_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(evaluate, "MAX_STRUCTURES", 2)
    arenas = [build_peg_parser(lambda b, w=w: b.literal(w) + b.end()) for w in ("a", "b", "c")]
    for arena in arenas:
        for _ in range(3):
            evaluate.entry_function(arena, arena.root)
    assert len(evaluate._structures) == 2


@pytest.mark.usefixtures("small_thresholds")
def test_a_grammar_the_compiler_refuses_runs_on_its_closures(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(arena: Arena, entry: int, closures: Any, firsts: Any) -> Any:
        raise RecursionError("maximum recursion depth exceeded during compilation")

    monkeypatch.setattr(evaluate, "compile_entry", refuse)
    arena = _weather_arena()
    for _ in range(8):
        fn = evaluate.entry_function(arena, arena.root)
        assert arena.parse('<call>[1, 2]</call>').success
    assert not _is_generated(fn)


@pytest.mark.usefixtures("small_thresholds")
def test_threads_share_the_structure_table(monkeypatch: pytest.MonkeyPatch) -> None:
    # A server parses from several threads: structures are looked up, compiled and evicted concurrently
    # (three structures, room for two), and every parse still gives the closures' result.
    monkeypatch.setattr(evaluate, "MAX_STRUCTURES", 2)
    words = ("alpha", "beta", "gamma")
    texts = {w: f"<{w}>" + '{"k": [1, "two", null]}' for w in words}
    errors: list[BaseException] = []

    def work(offset: int) -> None:
        try:
            for i in range(150):
                w = words[(i + offset) % 3]
                arena = build_peg_parser(lambda b, w=w: b.literal(f"<{w}>") + b.json() + b.end())
                for _ in range(3):
                    result = arena.parse(texts[w])
                    assert result.success and result.end == len(texts[w])
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
