"""The response_template export (autoparser/export), verified by transformers' own parser, not by ours.

For every corpus template with an export, every round-trip scenario it can express is parsed by transformers'
`parse_response` and its streaming `ResponseParser` (autoparser/corpus/exported.py), which must give the intended
message under the C++ comparison rules. Disagreements are in ratchet/response_template.json, each with the limit
of the format it comes from. One test per template, like the round-trip suite (the renders are shared through
its caches).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from autoparser import generate
from autoparser.chat.compare import as_message, message_differences
from autoparser.cli import main
from autoparser.corpus import Corpus
from autoparser.corpus.exported import transformers_results
from autoparser.corpus.roundtrip import SCENARIOS
from autoparser.errors import AutoparserError
from autoparser.export import response_template, transformers_message
from autoparser.testing.ratchet import Ratchet

pytest.importorskip("transformers.utils.chat_parsing", reason="transformers (5.13+) is in the test extra")

CORPUS = Corpus.load()
RATCHET = Ratchet(Path(__file__).resolve().parents[1] / "data" / "ratchet" / "response_template.json")


@pytest.mark.parametrize("name", CORPUS.names())
def test_transformers_reads_the_intended_message(name: str) -> None:
    RATCHET.check_many(transformers_results(name, CORPUS.by_name(name).read_text()))


def test_the_ratchet_names_exported_templates() -> None:
    RATCHET.check_known(f"{e.name}::{s}" for e in CORPUS.entries for s in SCENARIOS)


def test_most_templates_with_a_format_export_one() -> None:
    # the bar: at least 80% of the llama.cpp seed templates that show reasoning or tool calls (every
    # hand-written format has one, else the analysis says which)
    from autoparser.analysis.model import ReasoningMode, ToolFormat
    from autoparser.chat.handlers import find_handler
    from autoparser.params import cached_analysis
    from autoparser.template.render import normalize_source

    exported, with_format = [], []
    for e in CORPUS.entries:
        if not any(o.startswith("seed:templates/") for o in e.origins):
            continue
        source = e.read_text()
        a = cached_analysis(source)
        if find_handler(normalize_source(source)) is None and a.reasoning.mode is ReasoningMode.NONE and \
                a.tools.format.mode is ToolFormat.NONE and a.call_form is None:
            continue
        with_format.append(e.name)
        try:
            response_template(source)
            exported.append(e.name)
        except AutoparserError:  # not expressible, or (firefunction-v2) a template no plain request renders
            pass
    assert len(exported) >= 0.8 * len(with_format), sorted(set(with_format) - set(exported))


# A generation prompt that opens `<think>` after the assistant header, which no turn of the history writes (OLMo 3
# Think): the analysis derives the block (`prompt_reasoning`), the round trip cannot express it (the prompt is no
# prefix of a rendered reply), so transformers is checked here on outputs against our default parse.
_PROMPT_OPENS_THINK = ("{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                       "{%- if add_generation_prompt %}<|im_start|>assistant\n<think>{% endif %}")


@pytest.mark.parametrize("output", ["I should greet.</think>Hello!", "</think>Hi", "Still thinking"])
def test_transformers_reads_the_block_the_generation_prompt_opens(output: str) -> None:
    from transformers.utils import chat_parsing

    spec = response_template(_PROMPT_OPENS_THINK)
    assert spec["start_anchor"] == "<|im_start|>assistant"
    assert spec["fields"]["thinking"] == {"open": "<think>", "close": "</think>"}
    params = generate(_PROMPT_OPENS_THINK, {"messages": [{"role": "user", "content": "Hi"}],
                                            "reasoning_format": "auto"})
    theirs = as_message(transformers_message(chat_parsing.parse_response(output, spec, prefix=params.prompt)))
    assert not message_differences(params.parse(output), theirs)


@pytest.mark.parametrize("output", ["<SPECIAL_69>I should greet.<SPECIAL_70>Hello!", "Hi", "<SPECIAL_69>Still"])
def test_transformers_reads_the_block_the_template_writes_from_typed_content(output: str) -> None:
    """Apertus v1.1 writes its reasoning block only from a `thoughts` block of the content (`typed_reasoning`):
    the round trip renders none (it gives `reasoning_content`), so transformers is checked here on outputs against
    our default parse."""
    from transformers.utils import chat_parsing

    source = CORPUS.by_name("swiss-ai__Apertus-v1.1-4B-Instruct").read_text()
    spec = response_template(source)
    assert spec["fields"]["thinking"] == {"open": "<SPECIAL_69>", "close": "<SPECIAL_70>"}
    params = generate(source, {"messages": [{"role": "user", "content": "Hi"}], "reasoning_format": "auto"})
    theirs = as_message(transformers_message(chat_parsing.parse_response(output, spec, prefix=params.prompt)))
    assert not message_differences(params.parse(output), theirs)


# vLLM's beam parser derives a structural tag only from a call field whose opener captures the name, with exactly
# this transform, and whose closers and reasoning markers are literals (EXPORT-FORMATS.md §2); the consumers' test
# (tests/export/test_consumers.py) checks the tag it derives with vLLM's own code.
_BEAM_TRANSFORM = {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}}


def test_json_calls_whose_name_comes_first_name_the_function_in_the_opener() -> None:
    """Qwen3 renders `{"name": ..., "arguments": ...}` in `<tool_call>`: the opener runs to the arguments' value
    and captures the name; transformers reads the arguments as before."""
    from transformers.utils import chat_parsing

    spec = response_template(CORPUS.by_name("Qwen__Qwen3-0.6B").read_text())
    calls = spec["fields"]["tool_calls"]
    assert calls["transform"] == _BEAM_TRANSFORM and "(?P<name>" in calls["open_pattern"]
    assert spec["fields"]["thinking"] == {"open": "<think>", "close": "</think>"}
    output = ('<think>\nHm.\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", '
              '"days": {"n": 2}}}\n</tool_call>\n<tool_call>\n{"name": "ping", "arguments": {}}\n</tool_call>')
    message = transformers_message(chat_parsing.parse_response(output, spec, prefix=""))
    assert message["reasoning_content"].strip() == "Hm."
    assert message["tool_calls"] == [{"name": "get_weather", "arguments": {"city": "Paris", "days": {"n": 2}}},
                                     {"name": "ping", "arguments": {}}]


def test_a_reasoning_the_prompt_opens_unseen_is_opened_by_its_end() -> None:
    """Solar Open2's prompt writes its assistant header whatever `add_generation_prompt` says, and the analysis
    finds no assistant start: with no anchor the parser never sees the `<|think:start|>` the prompt wrote, so a bare
    end marker opens the (empty) reasoning instead of landing in the content."""
    spec = response_template(CORPUS.by_name("upstage__Solar-Open2-250B").read_text())
    assert spec["start_anchor_pattern"] == r"\Z"
    assert spec["fields"]["thinking"] == {"open_pattern": r"<\|think:start\|>|(?=<\|think:end\|>)",
                                          "close": "<|think:end|>"}


# vLLM 0.33's `validate_response_template_for_serving` (vllm/parser/response_template.py), which `--reasoning-parser
# hf|beam` and `--tool-call-parser hf|beam` run at start-up: only these fields, text without transform or join.
_VLLM_FIELDS = {"thinking", "content", "tool_calls"}


def test_the_vllm_form_is_one_vllm_serves() -> None:
    """Every corpus template with a response_template has one for vLLM (but Python lists), which keeps vLLM's
    serving rules (transformers' own form has a `join` on the content and a `markup` field, which vLLM refuses at
    start-up): a section's end is an optional part of the call's closer instead."""
    for entry in CORPUS.entries:
        try:
            ours = response_template(entry.read_text())["fields"]
        except AutoparserError:
            continue
        if ours.get("tool_calls", {}).get("content") == "python-call-list":  # (vLLM's parser has no such reader)
            with pytest.raises(AutoparserError, match="no python-call-list"):
                response_template(entry.read_text(), "vllm")
            continue
        fields = response_template(entry.read_text(), "vllm")["fields"]
        assert set(fields) <= _VLLM_FIELDS, entry.name
        for name in ("thinking", "content"):
            field = fields.get(name, {})
            assert field.get("content", "text") == "text" and "transform" not in field and "join" not in field
        if "markup" in ours:
            ends = ours["markup"]["open"]
            assert all(re.escape(end) in fields["tool_calls"]["close_pattern"] for end in ends), entry.name


def test_the_vllm_form_drops_the_join_and_folds_the_section_end() -> None:
    kimi = CORPUS.by_name("moonshotai__Kimi-K2-Instruct-0905").read_text()
    theirs, ours = response_template(kimi, "vllm")["fields"], response_template(kimi)["fields"]
    assert ours["content"] == {"repeats": True, "join": ""} and theirs["content"] == {}
    assert "markup" in ours and "markup" not in theirs
    assert theirs["tool_calls"]["close_pattern"] == r"(?:<\|tool_call_end\|>)(?:<\|tool_calls_section_end\|>)?"
    with pytest.raises(ValueError, match="one of transformers, vllm"):
        response_template(kimi, "sglang")


# --- the command line -----------------------------------------------------------------------------------------

def test_cli_prints_the_template_or_says_why_not(capsys: pytest.CaptureFixture[str]) -> None:
    qwen3 = str(CORPUS.by_name("Qwen__Qwen3-0.6B").path)
    assert main(["export", "response-template", qwen3]) == 0
    spec = json.loads(capsys.readouterr().out)
    assert spec["start_anchor"] == "<|im_start|>assistant" and set(spec["fields"]) == {"thinking", "content",
                                                                                        "tool_calls"}
    assert main(["export", "response-template", qwen3, "--for", "vllm"]) == 0
    assert json.loads(capsys.readouterr().out)["fields"]["content"] == {}
    lfm = str(CORPUS.by_name("ggufdoctor__LiquidAI_LFM2.5-2.6B-GGUF").path)
    assert main(["export", "response-template", lfm, "--for", "vllm"]) == 2
    assert "no python-call-list" in capsys.readouterr().err
    apertus = str(CORPUS.by_name("swiss-ai__Apertus-8B-Instruct-2509").path)
    assert main(["export", "response-template", apertus]) == 2
    err = capsys.readouterr().err
    assert err.startswith("autoparser: error: the call's name is its JSON key") and len(err.splitlines()) == 1


def test_cli_write_merges_into_a_tokenizer_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "tokenizer_config.json"
    config.write_text(json.dumps({"model_max_length": 4096, "chat_template": "{{ x }}", "eos_token": "<|im_end|>"}))
    qwen3 = str(CORPUS.by_name("Qwen__Qwen3-0.6B").path)
    assert main(["export", "response-template", qwen3, "--write", str(config)]) == 0
    merged = json.loads(config.read_text())
    assert list(merged) == ["model_max_length", "chat_template", "eos_token", "response_template"]
    assert merged["response_template"] == response_template(CORPUS.by_name("Qwen__Qwen3-0.6B").read_text())
    assert main(["export", "response-template", qwen3, "--write", str(tmp_path / "missing.json")]) == 2
    assert "cannot read tokenizer config" in capsys.readouterr().err
    assert main(["export", "response-template", qwen3, "--write", "-"]) == 2  # (read, then written back)
    assert capsys.readouterr().err == "autoparser: error: --write takes a tokenizer_config.json file, not stdin\n"
