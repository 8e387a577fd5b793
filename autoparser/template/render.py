"""Render chat templates exactly as Hugging Face transformers does, inside the guarded sandbox (sandbox.py).

Two render contexts are offered (`render_context`):

* transformers (default): `messages` (plain copies with reasoning aliased under `thinking` and
  `reasoning_content`), `tools` and `documents` always defined (None when absent), `add_generation_prompt`
  always a bool, extra keyword arguments on top.
* `cpp_context=True`: the context llama.cpp's `common_chat_template_direct_apply` builds. `tools` is defined
  only when non-empty, `add_generation_prompt` only when true, `enable_thinking` always present, preserve /
  reasoning-effort aliases are derived, and bos/eos may be stripped from the output.

A `ChatTemplate` is compiled once per semantics: for transformers' jinja2 when it is made (a syntax error
raises there), for llama.cpp's engine (cpp.py) the first time the analyzer or the capability probes ask.

Source normalisation: the C++ replaces CRLF and lone CR with LF and drops one trailing LF. jinja2's lexer
does the same (newline_sequence="\\n" normalises data and string literals; keep_trailing_newline=False drops
one trailing newline), so transformers and the C++ see the same text. We therefore compile the raw source
(normalising first would drop a *second* trailing newline) and expose the normalised text as
`ChatTemplate.source` for the analyzer's string work.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, AnyStr

from autoparser.template.cpp import CppTemplate, compile_cpp
from autoparser.template.sandbox import (
    DEFAULT_MAX_OUTPUT,
    DEFAULT_TIME_LIMIT,
    compile_template,
    make_environment,
    run_template,
)

__all__ = [
    "DEFAULT_MAX_OUTPUT",
    "DEFAULT_TIME_LIMIT",
    "ChatTemplate",
    "common_prefix_len",
    "normalize_source",
    "render_context",
]

_REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")


def common_prefix_len(a: AnyStr, b: AnyStr) -> int:
    """How many leading characters (or bytes) `a` and `b` share. Here and not in diff.py, which imports this
    module: rendering needs it too (the generation prompt is what follows the common prefix of two renders)."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    # Binary search on slice equality: C-speed comparisons instead of a Python loop per character.
    lo, hi = 0, n  # invariant: a[:lo] == b[:lo] and a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def normalize_source(source: str) -> str:
    """CRLF and lone CR become LF; one trailing LF is removed (as the C++ template loader does)."""
    text = source.replace("\r\n", "\n").replace("\r", "\n")
    if text.endswith("\n"):
        text = text[:-1]
    return text


_ENV = make_environment()


def _plain(value: Any) -> Any:
    """A fresh copy made of JSON-like builtins (what transformers hands the template)."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, Mapping):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    return f"<{type(value).__name__}>"


def _alias_reasoning(messages: list[Any]) -> list[Any]:
    out: list[Any] = []
    for message in messages:
        if isinstance(message, dict):
            reasoning = next((message[k] for k in _REASONING_FIELDS if message.get(k) is not None), None)
            if reasoning is not None:
                message = {"thinking": reasoning, **message, "reasoning_content": reasoning}
        out.append(message)
    return out



def render_context(messages: Sequence[Any], *, tools: Sequence[Any] | None = None,
                   documents: Sequence[Any] | None = None, add_generation_prompt: bool = False,
                   enable_thinking: bool | None = None, bos_token: str = "", eos_token: str = "",
                   extra_context: Mapping[str, Any] | None = None, cpp_context: bool = False) -> dict[str, Any]:
    """The variables a template sees, as transformers passes them or (`cpp_context`) as llama.cpp's
    `common_chat_template_direct_apply` does (see the module docstring). Inputs are copied, never shared."""
    extra = _plain(dict(extra_context or {}))
    if not cpp_context:
        ctx: dict[str, Any] = {"bos_token": bos_token, "eos_token": eos_token}
        if enable_thinking is not None:
            ctx["enable_thinking"] = enable_thinking
        ctx.update(extra)
        ctx["messages"] = _alias_reasoning(_plain(list(messages)))
        ctx["tools"] = _plain(list(tools)) if tools is not None else None
        ctx["documents"] = _plain(list(documents)) if documents is not None else None
        ctx["add_generation_prompt"] = bool(add_generation_prompt)
        return ctx
    ctx = {
        "messages": _plain(list(messages)),
        "bos_token": bos_token,
        "eos_token": eos_token,
        "enable_thinking": True if enable_thinking is None else bool(enable_thinking),
    }
    if tools:
        ctx["tools"] = _plain(list(tools))
    if documents:
        ctx["documents"] = _plain(list(documents))
    ctx.update(extra)
    if add_generation_prompt:
        ctx["add_generation_prompt"] = True
    preserve = ctx.get("preserve_reasoning")
    if isinstance(preserve, bool):
        ctx["preserve_thinking"] = preserve
        for key in ("clear_thinking", "truncate_history_thinking", "drop_thinking"):
            ctx[key] = not preserve
    effort = ctx.get("reasoning_effort")
    if isinstance(effort, str) and effort:
        ctx["reasoning_strength"] = effort
    return ctx


class ChatTemplate:
    """A chat template compiled once per semantics; `render` is pure and thread-safe."""

    __slots__ = ("_compiled", "_cpp", "max_output", "name", "raw_source", "source", "time_limit")

    def __init__(self, source: str, *, name: str = "<template>", time_limit: float = DEFAULT_TIME_LIMIT,
                 max_output: int = DEFAULT_MAX_OUTPUT) -> None:
        self.raw_source = source
        self.source = normalize_source(source)
        self.name = name
        self.time_limit = time_limit
        self.max_output = max_output
        self._cpp: CppTemplate | None = None
        # jinja2 applies the same normalisation itself (including the one trailing newline), so the raw text is
        # compiled: feeding it `source` would drop a second trailing newline.
        self._compiled = compile_template(_ENV, source, name)

    def __setattr__(self, key: str, value: Any) -> None:
        if hasattr(self, "_compiled"):
            raise AttributeError("ChatTemplate is immutable")
        object.__setattr__(self, key, value)

    def __repr__(self) -> str:
        return f"ChatTemplate(name={self.name!r}, {len(self.source)} chars)"

    @property
    def cpp(self) -> CppTemplate:
        """The same source compiled for llama.cpp's engine (cpp.py), on first use."""
        if self._cpp is None:
            # a cache, not a change of value: the template stays immutable to its users
            object.__setattr__(self, "_cpp", compile_cpp(self.raw_source, self.name, time_limit=self.time_limit,
                                                         max_output=self.max_output))
        assert self._cpp is not None
        return self._cpp

    def render(self, messages: Sequence[Any], *, tools: Sequence[Any] | None = None,
               documents: Sequence[Any] | None = None, add_generation_prompt: bool = False,
               enable_thinking: bool | None = None, bos_token: str = "", eos_token: str = "",
               extra_context: Mapping[str, Any] | None = None, now: datetime | None = None,
               cpp_context: bool = False, add_bos: bool = False, add_eos: bool = False, **kwargs: Any) -> str:
        """Render the conversation. `now` fixes the clock `strftime_now` reads (default: real local time).

        `add_bos`/`add_eos` (C++ convention): strip a leading bos / trailing eos the tokenizer would add again.
        """
        ctx = render_context(messages, tools=tools, documents=documents, add_generation_prompt=add_generation_prompt,
                             enable_thinking=enable_thinking, bos_token=bos_token, eos_token=eos_token,
                             extra_context={**(extra_context or {}), **kwargs}, cpp_context=cpp_context)
        out = run_template(self._compiled, ctx, name=self.name, time_limit=self.time_limit,
                           max_output=self.max_output, now=now)
        if add_bos and bos_token and out.startswith(bos_token):
            out = out[len(bos_token):]
        if add_eos and eos_token and out.endswith(eos_token):
            out = out[: -len(eos_token)]
        return out

    def generation_prompt(self, messages: Sequence[Any], **options: Any) -> str:
        """What add_generation_prompt appends: the suffix after the longest common prefix of both renders."""
        options.pop("add_generation_prompt", None)
        without = self.render(messages, add_generation_prompt=False, **options)
        with_prompt = self.render(messages, add_generation_prompt=True, **options)
        # The C++ compares UTF-8 bytes; a common byte prefix can end inside a code point, so compare bytes
        # and back off to a character boundary when decoding the suffix.
        k = common_prefix_len(without, with_prompt)
        suffix = with_prompt[k:]
        if k < len(without) and suffix:
            # Shared leading bytes of the first differing code points stay in the common prefix.
            x = without[k].encode("utf-8", "surrogateescape")
            y = suffix[0].encode("utf-8", "surrogateescape")
            j = common_prefix_len(x, y)
            if j:
                return (y[j:] + suffix[1:].encode("utf-8", "surrogateescape")).decode("utf-8", "surrogateescape")
        return suffix
