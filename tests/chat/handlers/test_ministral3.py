"""Ministral 3 handler behaviour the C++ conformance cases do not exercise (parsers/ministral3.cpp)."""

from __future__ import annotations

from autoparser.chat.handlers import find_handler
from autoparser.chat.handlers.ministral3 import adjusted_messages, detect
from autoparser.corpus import Corpus


def _source(name: str) -> str:
    return Corpus.load().by_origin(f"seed:templates/{name}").read_text()


def test_detection_catches_devstral_but_not_mistral_small_3_2() -> None:
    assert detect(_source("mistralai-Ministral-3-14B-Reasoning-2512.jinja"))
    assert detect(_source("unsloth-mistral-Devstral-Small-2507.jinja"))
    # Mistral Small 3.2 writes [CALL_ID]; the analyzer handles it.
    small = _source("Mistral-Small-3.2-24B-Instruct-2506.jinja")
    assert not detect(small)
    handler = find_handler(small)
    assert handler is None or handler.name != "ministral3"


def test_system_and_assistant_messages_become_typed_blocks() -> None:
    msgs = [{"role": "system", "content": "Be brief"},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": [{"type": "text", "text": "Hello"}], "reasoning_content": "greet"}]
    out = adjusted_messages(msgs)
    assert out[0] == {"role": "system", "content": [{"type": "text", "text": "Be brief"}]}
    assert out[1] is msgs[1]
    assert out[2] == {"role": "assistant", "content": [{"type": "thinking", "thinking": "greet"},
                                                       {"type": "text", "text": "Hello"}]}
