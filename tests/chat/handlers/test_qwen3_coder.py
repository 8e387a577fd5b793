"""The Qwen3-Coder family's handler takes the whitespace around a parameter's value from the template's analysis
(chat/handlers/qwen3_coder.py `_fit`): llama.cpp builds Qwen3-Coder's `<parameter=K>\\nVALUE\\n</parameter>` for
every template the handler detects, so the grammar rejected the outputs of family members that write the value
without those newlines, and only the recovery read them (`argument_whitespace`). Each case names the template
behaviour; `peg_tester` checks the strict parse, the stream and llama.cpp's grammar engine on the template's own
rendered output.
"""

from __future__ import annotations

import pytest

from autoparser.corpus import Corpus
from autoparser.corpus.roundtrip import build_output
from autoparser.params.generator import format_name
from autoparser.testing.peg_tester import peg_tester

CORPUS = Corpus.load()


@pytest.mark.parametrize(("behaviour", "name"), [
    ("a value right between its tags, `<parameter=K>VALUE</parameter>`", "XiaomiMiMo__MiMo-V2-Flash"),
    ("Qwen3-Coder's own newlines around the value", "Qwen__Qwen3-Coder-30B-A3B-Instruct"),
])
@pytest.mark.parametrize("scenario", ["d_parallel_tool_calls", "f_tool_call_escapes"])
def test_the_value_whitespace_the_template_writes(behaviour: str, name: str, scenario: str) -> None:
    entry = CORPUS.by_name(name)
    assert format_name(entry.read_text()) == "qwen3_coder", behaviour
    built = build_output(entry.read_text(), scenario)
    calls = [{"name": c["name"], "arguments": c["arguments"]} for c in built.intended["tool_calls"]]
    test = peg_tester(entry.path).test(built.output).tools(built.request["tools"]).parallel_tool_calls(True)
    test.reasoning_format("auto").enable_thinking(False).strict().expect({"tool_calls": calls})
