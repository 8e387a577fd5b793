"""Specialised formats: templates whose output the analyzer cannot describe, each handled by its own module.

llama.cpp checks 16 hand-written handlers before its autoparser (SPEC section 6), in a fixed order; the first
whose detection accepts the template source wins. Each module here defines `HANDLER = Handler(name, detect,
generate)`; ORDER lists the modules in the C++ order. A format the analyzer handles by itself has no module.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from autoparser.chat.generator import ChatParams, GenerationInputs
    from autoparser.template.render import ChatTemplate

# C++ order (common_chat_try_specialized_template)
ORDER = (
    "ministral3",
    "gpt_oss",
    "muse_glimmer",
    "functionary_v3_2",
    "kimi_k2",
    "kimi_k3",
    "ling3",
    "cohere2moe",
    "lfm2",
    # gigachat_v3: the analyzer handles GigaChat v3 by itself (4/4 C++ cases through the generic path)
    "minimax_m3",
    "deepseek",
    "gemma4",
    "minicpm5",
    "qwen3_coder",
)


@dataclass(frozen=True)
class Handler:
    name: str
    detect: Callable[[str], bool]
    generate: Callable[[ChatTemplate, GenerationInputs], ChatParams]


_LOADED: list[Handler] | None = None


def handlers() -> list[Handler]:
    """The handler modules that exist, in C++ order (loaded once)."""
    global _LOADED
    if _LOADED is None:
        loaded = []
        for name in ORDER:
            try:
                module = importlib.import_module(f"autoparser.chat.handlers.{name}")
            except ModuleNotFoundError as e:
                if e.name != f"autoparser.chat.handlers.{name}":
                    raise
                continue
            loaded.append(module.HANDLER)
        _LOADED = loaded
    return _LOADED


def find_handler(source: str) -> Handler | None:
    for h in handlers():
        if h.detect(source):
            return h
    return None
