"""SGLang's reading of model outputs, run in SGLang's own environment (`python -m tools.sglang_env` makes it):
JSON lines in, JSON lines out, as llama.cpp's driver. It imports nothing of autoparser.

Each input line is a template and its outputs: `{"id", "template", "cases": [{"prompt", "output", "tools",
"chat_template_kwargs"}]}`. Each output line: `{"id", "tool_parser", "reasoning_parser", "answers": [...]}`, an
answer per case, `{"message": {"content", "reasoning_content", "tool_calls": [{"name", "arguments"}]}}` or
`{"error": ...}` where SGLang raised on that output.

Everything SGLang decides is decided by SGLang's code, from the package `llm-router-utils` (an extraction of
SGLang's parsers and of its chat serving's request side):
- which parsers: `template_detection`, the rules SGLang's template manager runs on the chat template text. The
  tokenizer those rules also look at is not in the corpus; its added tokens are approximated by the special
  tokens the template writes (`_vocab`), which is what a tokenizer shipped with the template holds;
- whether the output starts inside reasoning: the template's own switch (reasoning always on) or SGLang's
  `OpenAIServingChat._get_reasoning_from_request` for the request's chat_template_kwargs;
- the reading itself: the reasoning parser first, then `OpenAIServingChat._process_tool_calls` on the rest, as
  SGLang's chat response does.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from types import SimpleNamespace
from typing import Any

from llm_router_utils.sglang.srt.entrypoints.openai.protocol import Tool
from llm_router_utils.sglang.srt.entrypoints.openai.serving_chat import OpenAIServingChat
from llm_router_utils.sglang.srt.parser import template_detection
from llm_router_utils.sglang.srt.parser.reasoning_parser import ReasoningParser

# Special tokens as templates write them: `<|im_start|>`, `<｜tool▁calls▁begin｜>`, `<tool_call>`, `[TOOL_CALLS]`.
_SPECIAL = re.compile(r"<[|｜/]?[A-Za-z_][^<>\s'\"{}]{0,40}>|\[[A-Z_/]{3,30}\]")


class _Vocab:
    """A tokenizer as template_detection reads one (its vocabulary only)."""

    def __init__(self, template: str) -> None:
        self.tokens = {t: i for i, t in enumerate(sorted(set(_SPECIAL.findall(template))))}

    def get_vocab(self) -> dict[str, int]:
        return self.tokens


class _Template:
    """What SGLang decides from one template: its parsers and the serving state its chat code reads."""

    def __init__(self, template: str) -> None:
        always_on, config = template_detection.detect_reasoning_pattern(template)
        context = template_detection.build_detection_context(template, _Vocab(template), config, always_on)
        self.reasoning_parser = template_detection.match_rules(context, template_detection.REASONING_PARSER_RULES,
                                                               "reasoning parser")
        self.tool_parser = template_detection.match_rules(context, template_detection.TOOL_CALL_PARSER_RULES,
                                                          "tool-call parser")
        # SGLang's chat serving, with only the state its request-side methods read (no tokenizer, no engine)
        serving: Any = OpenAIServingChat.__new__(OpenAIServingChat)
        serving.reasoning_parser = self.reasoning_parser
        serving.tool_call_parser = self.tool_parser
        serving.template_manager = SimpleNamespace(reasoning_config=config, force_reasoning=always_on)
        serving.tokenizer_manager = SimpleNamespace(tokenizer=None)
        serving._reasoning_detector = (ReasoningParser(self.reasoning_parser, stream_reasoning=False).detector
                                       if self.reasoning_parser and self.reasoning_parser != "k2_horizon" else None)
        self.serving = serving
        self.always_on = always_on

    def read(self, line: dict[str, Any]) -> dict[str, Any]:
        request = SimpleNamespace(chat_template_kwargs=line.get("chat_template_kwargs"), reasoning_effort=None)
        text, reasoning = line["output"], ""
        if self.reasoning_parser:
            force = bool(self.always_on or self.serving._get_reasoning_from_request(request))
            parser = ReasoningParser(self.reasoning_parser, stream_reasoning=False, force_reasoning=force,
                                     request=request)
            found, rest = parser.parse_non_stream(text)
            reasoning, text = found or "", rest or ""
        calls: list[dict[str, str]] = []
        if line.get("tools") and self.tool_parser:
            tools = [Tool.model_validate(t) for t in line["tools"]]
            done = self.serving._process_tool_calls(text, tools, {"type": "stop"}, tool_choice="auto")
            text = done.remaining_text if done.remaining_text is not None else text
            calls = [{"name": c.function.name, "arguments": c.function.arguments} for c in done.tool_calls or []]
        return {"content": text, "reasoning_content": reasoning, "tool_calls": calls}


def _answer(template: _Template, case: dict[str, Any]) -> dict[str, Any]:
    try:
        return {"message": template.read(case)}
    except Exception as e:  # SGLang's own failure on this output: its answer, not the bridge's end
        return {"error": f"{type(e).__name__}: {e}"}


def main() -> None:
    logging.disable(logging.CRITICAL)  # SGLang logs a parse it gives up on; the answer says it
    out, sys.stdout = sys.stdout, sys.stderr  # nothing but answers on the protocol's channel
    for raw in sys.stdin:
        if not raw.strip():
            continue
        job = json.loads(raw)
        answer: dict[str, Any] = {"id": job.get("id")}
        try:
            template = _Template(job["template"])
        except Exception as e:  # a template SGLang's detection raises on: every output's answer says so
            answer["answers"] = [{"error": f"template detection: {type(e).__name__}: {e}"} for _ in job["cases"]]
        else:
            answer.update(tool_parser=template.tool_parser, reasoning_parser=template.reasoning_parser,
                          answers=[_answer(template, case) for case in job["cases"]])
        out.write(json.dumps(answer, ensure_ascii=False) + "\n")
    out.flush()

if __name__ == "__main__":
    main()
