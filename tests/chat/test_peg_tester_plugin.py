"""The contributor API as contributors use it: the `peg_tester` fixture from the installed pytest plugin."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from autoparser.corpus import Corpus
from autoparser.testing.peg_tester import PegTestFailure

TOOLS = [{"type": "function", "function": {"name": "special_function", "description": "I'm special",
                                           "parameters": {"type": "object",
                                                          "properties": {"arg1": {"type": "integer"}},
                                                          "required": ["arg1"]}}}]


@pytest.fixture
def qwen3(peg_tester: Callable[..., Any]) -> Any:
    return peg_tester(Corpus.load().by_origin("seed:templates/Qwen-Qwen3-0.6B.jinja").path)


def test_fluent_api_passes_on_a_real_call(qwen3: Any) -> None:
    out = '<think>\nI\'m\nthinking\n</think>\n\n<tool_call>\n{"name": "special_function", "arguments": {"arg1": 1}}\n</tool_call>'
    msg = qwen3.test(out).tools(TOOLS).reasoning_format("auto").enable_thinking(True).expect(
        {"reasoning_content": "I'm\nthinking", "content": "",
         "tool_calls": [{"name": "special_function", "arguments": '{"arg1": 1}'}]})
    assert msg.tool_calls[0].name == "special_function"


def test_a_wrong_expectation_reports_the_fields_that_differ(qwen3: Any) -> None:
    with pytest.raises(PegTestFailure) as err:
        qwen3.test("Hello, world!").reasoning_format("auto").expect({"content": "Goodbye"})
    text = str(err.value)
    assert "content: expected 'Goodbye', got 'Hello, world!'" in text
    assert "whole parse" in text and "streamed" in text


QUOTED_X = '"x"'


def test_grammar_is_checked_by_llama_cpp(qwen3: Any, gbnf_oracle: Any) -> None:
    # the argument violates the tool's schema (a string for an integer): the parser still maps it,
    # but llama.cpp's engine rejects the constrained part of the output
    out = '<tool_call>\n{"name": "special_function", "arguments": {"arg1": "x"}}\n</tool_call>'
    with pytest.raises(PegTestFailure) as err:
        qwen3.test(out).tools(TOOLS).expect({"tool_calls": [{"name": "special_function", "arguments": '{"arg1": "x"}'}]})
    # where, and what the grammar takes there, as the command line says a rejection (the caret under the quote)
    lines = str(err.value).splitlines()
    assert lines[1:3] == ["  - grammar: the constrained output is not accepted (rejects it)",
                          f"    at position {out.index(QUOTED_X)}, expected " + '"-" or "0".."9"']
    assert lines[4].index("^") == lines[3].index(QUOTED_X)  # (the excerpt of the output, the caret under it)


def test_a_strict_rejection_is_the_testers_report_naming_the_template(qwen3: Any) -> None:
    out = '<tool_call>\n{"name": "special_function", "arguments": {"arg1": 1, oops}}\n</tool_call>'
    with pytest.raises(PegTestFailure) as err:
        qwen3.test(out).tools(TOOLS).strict().grammar_check(False).expect(
            {"tool_calls": [{"name": "special_function", "arguments": '{"arg1": 1}'}]})
    text = str(err.value)
    assert text.startswith(f"peg_tester(Qwen__Qwen3-0.6B.jinja).test({out!r}) failed:\n")
    assert "  - whole parse (strict): the output does not match the format this template's model writes\n" \
           f"    at position {out.index('oops')}, expected " + '"\\""\n' in text


def test_boolean_setters_default_to_true(qwen3: Any) -> None:
    calls = [{"name": "special_function", "arguments": '{"arg1": 1}'}, {"name": "special_function",
                                                                       "arguments": '{"arg1": 2}'}]
    # Qwen3's parallel calls: several in one <tool_call> block, which a request for one call reads as a repair
    out = "<tool_call>\n" + ", ".join(f'{{"name": "special_function", "arguments": {c["arguments"]}}}'
                                      for c in calls) + "\n</tool_call>"
    qwen3.test(out).tools(TOOLS).parallel_tool_calls().expect({"tool_calls": calls})
    with pytest.raises(PegTestFailure, match=r"repairs: expected none, got \['extra_call'\]"):
        qwen3.test(out).tools(TOOLS).expect({"tool_calls": calls})


def test_a_key_expect_does_not_know_is_refused(peg_tester: Callable[..., Any]) -> None:
    case = peg_tester("Qwen__Qwen3-0.6B").test("Hi")
    with pytest.raises(ValueError, match=r"unknown key 'reasoning' in the message \(did you mean 'reasoning_content'"):
        case.expect({"content": "Hi", "reasoning": ""})
    with pytest.raises(ValueError, match=r"unknown key 'args' in tool_calls\[0\]"):
        case.expect({"tool_calls": [{"name": "f", "args": "{}"}]})
    with pytest.raises(ValueError, match="expect_diagnostics"):
        case.expect({"content": "Hi", "diagnostics": []})


def test_templates_resolve_by_corpus_name_with_the_command_lines_defaults(peg_tester: Callable[..., Any]) -> None:
    # no reasoning_format set: auto, as `autoparser parse` uses
    msg = peg_tester("Qwen__Qwen3-0.6B").test("<think>\nhm\n</think>\n\nHi").expect(
        {"reasoning_content": "hm", "content": "Hi"})
    assert msg.reasoning_content.strip() == "hm"
    from autoparser.errors import AutoparserError

    with pytest.raises(AutoparserError, match=r"no template file 'corpus/templates/Nope\.jinja', and no corpus "
                                              r"template named 'Nope'"):
        peg_tester("corpus/templates/Nope.jinja")


def test_without_the_engine_the_grammar_check_is_skipped_or_required(
        qwen3: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from autoparser.testing import gbnf_oracle
    from autoparser.testing import peg_tester as module

    # a grammar violation (a string for an integer) that only the grammar check catches
    out = '<tool_call>\n{"name": "special_function", "arguments": {"arg1": "x"}}\n</tool_call>'
    expected = {"tool_calls": [{"name": "special_function", "arguments": '{"arg1": "x"}'}]}
    monkeypatch.setattr(gbnf_oracle, "available", lambda: False)
    monkeypatch.setattr(module, "_warned", [])
    monkeypatch.delenv("AUTOPARSER_REQUIRE_ORACLE", raising=False)
    with pytest.warns(module.GrammarCheckSkipped, match="grammar check skipped"):
        qwen3.test(out).tools(TOOLS).expect(expected)
    monkeypatch.setenv("AUTOPARSER_REQUIRE_ORACLE", "1")
    with pytest.raises(PegTestFailure, match=r"grammar: .*\(AUTOPARSER_REQUIRE_ORACLE=1\)"):
        qwen3.test(out).tools(TOOLS).expect(expected)
    qwen3.test(out).tools(TOOLS).grammar_check(False).expect(expected)  # switched off for this case
