"""Specialised formats: templates whose output the analyzer cannot describe, each handled by its own module.

llama.cpp checks 16 hand-written handlers before its autoparser (SPEC section 6). Each handler here declares
how it detects its template (source substrings, in the C++ order) and builds ChatParams itself. The registry
is ordered: the first handler whose `detect` accepts the source wins.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from autoparser.chat.generator import ChatParams, GenerationInputs
    from autoparser.template.render import ChatTemplate


@dataclass(frozen=True)
class Handler:
    name: str
    detect: Callable[[str], bool]
    generate: Callable[[ChatTemplate, GenerationInputs], ChatParams]


HANDLERS: list[Handler] = []


def register(name: str, detect: Callable[[str], bool]) -> Callable[[Any], Any]:
    def deco(fn: Callable[[ChatTemplate, GenerationInputs], ChatParams]) -> Callable[..., Any]:
        HANDLERS.append(Handler(name, detect, fn))
        return fn

    return deco


def find_handler(source: str) -> Handler | None:
    for h in HANDLERS:
        if h.detect(source):
            return h
    return None
