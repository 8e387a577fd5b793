"""The matrix's engines that run outside this process, asked for real: llama.cpp through the live oracle's driver
($AUTOPARSER_CPP_ORACLE, built by `python -m tools.cpp_oracle`) and SGLang's parsers in their own environment
(`python -m tools.sglang_env`). `tox -e matrix` builds both and sets AUTOPARSER_REQUIRE_ENGINES=1, which turns
a missing one into a failure; elsewhere such a test is skipped with what to run.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from autoparser.corpus import Corpus
from autoparser.matrix.cases import RENDERED, TemplateCases, judge, template_cases
from autoparser.matrix.engines import (
    GAVE_UP,
    AutoparserEngine,
    Engine,
    LlamaCppEngine,
    Reading,
    SGLangEngine,
    default_sglang_python,
)
from autoparser.matrix.run import ENGINE_WRONG, run_matrix

CORPUS = Corpus.load()


def _ready(engine: Engine) -> Engine:
    why = engine.missing()
    if why is not None:
        if os.environ.get("AUTOPARSER_REQUIRE_ENGINES") == "1":
            pytest.fail(f"AUTOPARSER_REQUIRE_ENGINES=1 but {engine.name} cannot run: {why}")
        pytest.skip(why)
    return engine


@pytest.fixture(scope="module")
def llama_cpp() -> Engine:
    driver = os.environ.get("AUTOPARSER_CPP_ORACLE")
    return _ready(LlamaCppEngine(Path(driver) if driver else None))


@pytest.fixture(scope="module")
def sglang() -> Engine:
    python = os.environ.get("AUTOPARSER_SGLANG_PYTHON")
    return _ready(SGLangEngine(Path(python) if python else default_sglang_python()))


def _cases(*names: str) -> list[TemplateCases]:
    return [template_cases(CORPUS.by_name(n)) for n in names]


def _rendered_right(template: TemplateCases, reading: Reading) -> list[str]:
    """The rendered cases the reading misses (with what it got)."""
    out = []
    for case, answer in zip(template.cases, reading.answers):
        if case.kind == RENDERED:
            problems = judge(case, answer.message) if answer.message is not None else [answer.error or "?"]
            if problems:
                out.append(f"{case.id}: {problems}")
    return out


def test_llama_cpp_reads_qwen3_as_its_template_renders_it(llama_cpp: Engine) -> None:
    qwen3, yi = _cases("Qwen__Qwen3-0.6B", "01-ai__Yi-1.5-9B-Chat")
    readings = llama_cpp.read_all([qwen3, yi], workers=2)
    assert [len(r.answers) for r in readings] == [len(qwen3.cases), len(yi.cases)]
    assert readings[0].choice == "peg-native"
    assert _rendered_right(qwen3, readings[0]) == [] and _rendered_right(yi, readings[1]) == []


def test_sglang_picks_its_parsers_from_the_template(sglang: Engine) -> None:
    # Qwen3 (`<tool_call>` JSON, `<think>`), Kimi K2 (its own section tokens, picked by the tokens the template
    # writes), and a template no rule of SGLang's matches (a user must name the parsers by hand)
    qwen3, kimi, yi = _cases("Qwen__Qwen3-0.6B", "moonshotai__Kimi-K2-Instruct", "01-ai__Yi-1.5-9B-Chat")
    readings = sglang.read_all([qwen3, kimi, yi], workers=2)
    assert [r.choice for r in readings] == ["tools qwen + reasoning qwen3", "tools kimi_k2 + reasoning kimi_k2", None]
    assert _rendered_right(qwen3, readings[0]) == []
    # no parser: the whole output is the content, which is right for a plain answer
    plain = [a for c, a in zip(yi.cases, readings[2].answers) if c.scenario == "a_plain" and c.kind == RENDERED]
    assert plain and plain[0].message is not None and plain[0].message.content == "The capital of France is Paris."


def test_sglang_failing_on_one_output_is_that_output_s_answer(sglang: Engine) -> None:
    (qwen3,) = _cases("Qwen__Qwen3-0.6B")
    calls = next(c for c in qwen3.cases if c.scenario == "c_one_tool_call" and c.kind == RENDERED)
    broken = TemplateCases(qwen3.name, qwen3.family, qwen3.path, qwen3.source, (
        type(calls)(calls.id, calls.scenario, calls.kind, calls.output, calls.prompt,
                    {**calls.request, "tools": [{"type": "function", "function": {}}]}, calls.meant), calls))
    (reading,) = sglang.read_all([broken])
    assert reading.answers[0].message is None and "ValidationError" in (reading.answers[0].error or "")
    assert reading.answers[1].message is not None and judge(calls, reading.answers[1].message) == []


def test_a_template_llama_cpp_fails_on_is_its_miss_not_its_user_s(llama_cpp: Engine) -> None:
    # phi4-mini's template (vLLM's): llama.cpp's analysis fails on it ("Unable to generate parser"), autoparser
    # reads its bare JSON calls
    matrix = run_matrix(CORPUS, [AutoparserEngine(), llama_cpp], only=["vllm__tool_chat_template_phi4_mini"])
    cell = matrix.rows[0].cells["llama.cpp"]
    assert cell.choice == GAVE_UP and cell.rendered[0] == 0 < cell.rendered[1]
    assert {m.verdict for m in cell.misses if m.kind == RENDERED} == {ENGINE_WRONG}
    assert all("Unable to generate parser" in m.differences[0] for m in cell.misses)
