"""LLM-jp-4.1's Harmony dialect (parsers/llm-jp-harmony.cpp, llama.cpp b11434) beyond its C++ chat cases."""

from __future__ import annotations

from functools import cache

from autoparser.chat.handlers import find_handler
from autoparser.corpus import Corpus
from autoparser.params import generate

TOOL = {"type": "function", "function": {"name": "get_weather", "description": "",
                                         "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                        "required": ["city"]}}}
CALL = ("<|start|> assistant to=functions.get_weather<|channel|> commentary <|constrain|> json<|message|> "
        '{"city": "%s"}')


@cache
def _source() -> str:
    return Corpus.load().by_origin("seed:templates/llm-jp-llm-jp-4.1-8b-thinking.jinja").read_text()


def test_the_format_comment_selects_the_dialect_before_gpt_oss() -> None:
    # llama.cpp's copy carries `{#- chat_format=llm-jp-harmony-v1 -#}`; the same markup without it is gpt-oss's
    handler = find_handler(_source())
    assert handler is not None and handler.name == "llm_jp_harmony"
    without = _source().replace("{#- chat_format=llm-jp-harmony-v1 -#}", "")
    assert "<|channel|>" in without and getattr(find_handler(without), "name", None) == "gpt_oss"


def _params(**request: object) -> object:
    return generate(_source(), {"messages": [{"role": "user", "content": "Weather?"}], "tools": [TOOL],
                                "reasoning_format": "auto", "now": "2026-01-01", **request})


def test_parallel_calls_are_turns_split_by_end() -> None:
    params = _params(parallel_tool_calls=True)
    out = "<|channel|> analysis<|message|> Two cities<|end|>" + CALL % "Paris" + "<|end|>" + CALL % "Tokyo"
    msg = params.parse(out, strict=True)  # type: ignore[attr-defined]
    assert msg.reasoning_content == "Two cities"
    assert [c.arguments for c in msg.tool_calls] == ['{"city": "Paris"}', '{"city": "Tokyo"}']
    # the lazy grammar wakes at the first recipient and covers every call (the trigger rule holds them all)
    assert params.grammar_lazy  # type: ignore[attr-defined]
    assert "tool-call ::= (tool-get-weather) (end start (tool-get-weather))*" in params.grammar.splitlines()  # type: ignore[attr-defined]


def test_without_parallel_calls_a_second_call_is_read_and_reported() -> None:
    # llama.cpp reads the first call and drops what follows (checked against the live oracle, b11434); the
    # default parse reads the further message's call too, as gpt-oss's, and says so
    out = (CALL % "Paris" + "<|end|>" + CALL % "Tokyo").removeprefix("<|start|> assistant")
    params = _params()
    strict = params.parse(out, strict=True)  # type: ignore[attr-defined]
    assert [c.arguments for c in strict.tool_calls] == ['{"city": "Paris"}'] and strict.content == ""
    msg = params.parse(out)  # type: ignore[attr-defined]
    assert [c.arguments for c in msg.tool_calls] == ['{"city": "Paris"}', '{"city": "Tokyo"}']
    assert msg.content == ""
    assert [(d.kind, d.position) for d in msg.diagnostics] == [("section_repeated", out.index("<|end|>"))]


def test_required_tool_choice_is_eager() -> None:
    params = _params(tool_choice="required")
    assert params.grammar and not params.grammar_lazy  # type: ignore[attr-defined]
    msg = params.parse(" to=functions.get_weather<|channel|> commentary<|message|> {\"city\": \"Oslo\"}",  # type: ignore[attr-defined]
                       strict=True)
    assert [(c.name, c.arguments) for c in msg.tool_calls] == [("get_weather", '{"city": "Oslo"}')]
