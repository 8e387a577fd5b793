"""Our renderer is byte-equal to transformers' `render_jinja_template` on every corpus template.

For each template and a fixed set of conversations, both renderers either produce the same string or both
raise. Known, explained differences live in tests/data/ratchet/render_parity.json.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import transformers.utils.chat_template_utils as transformers_utils

from autoparser.errors import TemplateError
from autoparser.template.render import ChatTemplate

pytestmark = [pytest.mark.transformers, pytest.mark.corpus]

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "corpus" / "templates"
RATCHET_FILE = ROOT / "tests" / "data" / "ratchet" / "render_parity.json"
NOW = datetime(2024, 7, 26, 9, 30, 0)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the weather for a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "description": "City name"}},
                "required": ["city"],
            },
        },
    }
]
CALL = {"id": "call00001", "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Paris, \"FR\" — été"}}}

CONVERSATIONS: dict[str, dict[str, Any]] = {
    "plain": {"messages": [
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi there"},
        {"role": "user", "content": "How are you?"},
    ]},
    "system": {"messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Hello"},
    ]},
    "tools": {"messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": TOOLS},
    "tool_call": {"messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [CALL]},
    ], "tools": TOOLS},
    "tool_response": {"messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [CALL]},
        {"role": "tool", "content": "{\"temp\": 21}", "tool_call_id": "call00001", "name": "get_weather"},
        {"role": "assistant", "content": "It is 21 degrees."},
        {"role": "user", "content": "Thanks"},
    ], "tools": TOOLS},
    "reasoning": {"messages": [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4", "reasoning_content": "Adding two and two."},
        {"role": "user", "content": "3+3?"},
    ], "enable_thinking": True},
}


class _FixedDatetime(datetime):
    @classmethod
    def now(cls, tz: Any = None) -> _FixedDatetime:
        return cls(NOW.year, NOW.month, NOW.day, NOW.hour, NOW.minute, NOW.second)


@pytest.fixture(autouse=True, scope="module")
def _fixed_transformers_clock() -> Iterator[None]:
    # transformers' strftime_now reads the module-global `datetime` at call time.
    saved = transformers_utils.datetime
    transformers_utils.datetime = _FixedDatetime
    yield
    transformers_utils.datetime = saved


def _template_files() -> list[str]:
    return sorted(p.name for p in TEMPLATES.glob("*.jinja"))


@cache
def _source(name: str) -> str:
    return (TEMPLATES / name).read_bytes().decode("utf-8")


@cache
def _ours(name: str) -> ChatTemplate | TemplateError:
    try:
        return ChatTemplate(_source(name), name=name)
    except TemplateError as err:
        return err


@cache
def _ratchet() -> dict[str, str]:
    loaded: dict[str, str] = json.loads(RATCHET_FILE.read_text(encoding="utf-8"))
    return loaded


def _render_ours(name: str, conv: dict[str, Any]) -> str | None:
    template = _ours(name)
    if isinstance(template, TemplateError):
        return None
    try:
        return template.render(conv["messages"], tools=conv.get("tools"), add_generation_prompt=True,
                               bos_token="<s>", eos_token="</s>", now=NOW,
                               **({"enable_thinking": conv["enable_thinking"]} if "enable_thinking" in conv else {}))
    except TemplateError:
        return None


def _render_transformers(name: str, conv: dict[str, Any]) -> str | None:
    kwargs: dict[str, Any] = {"bos_token": "<s>", "eos_token": "</s>"}
    if "enable_thinking" in conv:
        kwargs["enable_thinking"] = conv["enable_thinking"]
    try:
        # As a transformers user runs it: jinja2's warning on an escape like '\s' in a template string is a
        # warning there, not the syntax error pytest's filterwarnings=error would turn it into.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.simplefilter("ignore", SyntaxWarning)
            rendered, _ = transformers_utils.render_jinja_template(
                conversations=[conv["messages"]], tools=conv.get("tools"), chat_template=_source(name),
                add_generation_prompt=True, **kwargs)
    except Exception:  # any failure counts as "raises" for parity
        return None
    out: str = rendered[0]
    return out


@pytest.mark.parametrize("name", _template_files())
def test_render_parity(name: str) -> None:
    mismatches = []
    for conv_id, conv in CONVERSATIONS.items():
        ours = _render_ours(name, conv)
        theirs = _render_transformers(name, conv)
        case_id = f"{name}::{conv_id}"
        equal = ours == theirs
        if case_id in _ratchet():
            assert not equal, f"{case_id} now matches transformers: remove from ratchet"
            continue
        if not equal:
            mismatches.append((conv_id, "raises" if ours is None else (ours or "")[:200],
                               "raises" if theirs is None else (theirs or "")[:200]))
    assert not mismatches, mismatches


def test_ratchet_names_known_templates() -> None:
    files = set(_template_files())
    stale = sorted(k for k in _ratchet() if k.split("::")[0] not in files)
    assert not stale, f"ratchet names unknown templates: {stale}"
