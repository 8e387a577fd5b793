"""Specialised formats: templates whose output the analyzer cannot describe, each in its own module.

llama.cpp checks its hand-written formats before its autoparser (`common_chat_try_specialized_template`,
common/chat.cpp), in a fixed order; the first whose detection accepts the template source wins. Each module
here has `detect(source) -> FormatSpec | None` (the spec of the variant the template is) and says in its
docstring why the analyzer cannot derive the format. A format the analyzer handles by itself has no module.
"""

from __future__ import annotations

from collections.abc import Callable

from autoparser.chat.handlers import (
    cohere2moe,
    deepseek,
    functionary_v3_2,
    gemma4,
    gigachat_v3,
    gpt_oss,
    kimi_k2,
    kimi_k3,
    lfm2,
    ling3,
    llm_jp_harmony,
    minicpm5,
    minimax_m3,
    ministral3,
    muse_glimmer,
    qwen3_coder,
)
from autoparser.chat.spec import FormatSpec

__all__ = ["DETECTORS", "find_handler"]

# C++ order (common_chat_try_specialized_template, llama.cpp b11434)
DETECTORS: tuple[Callable[[str], FormatSpec | None], ...] = (
    ministral3.detect,
    llm_jp_harmony.detect,
    gpt_oss.detect,
    muse_glimmer.detect,
    functionary_v3_2.detect,
    kimi_k2.detect,
    kimi_k3.detect,
    ling3.detect,
    cohere2moe.detect,
    lfm2.detect,
    gigachat_v3.detect,
    minimax_m3.detect,
    deepseek.detect,
    gemma4.detect,
    minicpm5.detect,
    qwen3_coder.detect,
)


def find_handler(source: str) -> FormatSpec | None:
    """The specialised format of a template (normalised source), or None for the analyzer's generic path."""
    for detect in DETECTORS:
        spec = detect(source)
        if spec is not None:
            return spec
    return None
