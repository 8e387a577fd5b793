"""Render chat templates exactly as Hugging Face transformers does, inside a guarded sandbox.

The environment mirrors `transformers.utils.chat_template_utils._cached_compile_jinja_template`:
ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, a `{% generation %}` block tag,
the non-escaping `tojson` filter, `raise_exception`, `strftime_now`, a restricted `dict` and `namespace`.

Two render contexts are offered:

* transformers (default): `messages` (plain copies with reasoning aliased under `thinking` and
  `reasoning_content`), `tools` and `documents` always defined (None when absent), `add_generation_prompt`
  always a bool, extra keyword arguments on top.
* `cpp_context=True`: the context llama.cpp's `common_chat_template_direct_apply` builds. `tools` is defined
  only when non-empty, `add_generation_prompt` only when true, `enable_thinking` always present, preserve /
  reasoning-effort aliases are derived, and bos/eos may be stripped from the output.

Templates are untrusted: the sandbox is never bypassed, `range()` is bounded (jinja2's MAX_RANGE), the
output size is bounded while it is produced, and a wall-clock deadline is checked on every call, attribute
access, range step and output chunk, so runaway templates raise TemplateError instead of hanging.

Source normalisation: the C++ replaces CRLF and lone CR with LF and drops one trailing LF. jinja2's lexer
does the same (newline_sequence="\\n" normalises data and string literals; keep_trailing_newline=False drops
one trailing newline), so transformers and the C++ see the same text. We therefore compile the raw source
(normalising first would drop a *second* trailing newline) and expose the normalised text as
`ChatTemplate.source` for the analyzer's string work.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.parser
import jinja2.sandbox
import jinja2.utils
from jinja2.sandbox import ImmutableSandboxedEnvironment

from autoparser.errors import TemplateError

__all__ = [
    "DEFAULT_MAX_OUTPUT",
    "DEFAULT_TIME_LIMIT",
    "ChatTemplate",
    "make_environment",
    "normalize_source",
]

DEFAULT_TIME_LIMIT = 10.0
DEFAULT_MAX_OUTPUT = 10_000_000
# jinja2's own limit; transformers inherits it, so parity needs the same figure.
MAX_RANGE = jinja2.sandbox.MAX_RANGE

_REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")


class _Limits:
    """Per-render guard state, reachable from the environment's hooks through a context variable."""

    __slots__ = ("deadline", "max_output", "now")

    def __init__(self, deadline: float, max_output: int, now: datetime | None) -> None:
        self.deadline = deadline
        self.max_output = max_output
        self.now = now

    def check(self) -> None:
        if time.monotonic() > self.deadline:
            raise TemplateError("template rendering exceeded its time limit")


_LIMITS: contextvars.ContextVar[_Limits | None] = contextvars.ContextVar("autoparser_template_limits", default=None)


def _check_deadline() -> None:
    limits = _LIMITS.get()
    if limits is not None:
        limits.check()


def _common_prefix_len(pair: Sequence[Any]) -> int:
    a, b = pair
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
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


class _GuardedRange:
    """A `range` whose iteration honours the render deadline; behaves like range for templates."""

    __slots__ = ("_r",)

    def __init__(self, r: range) -> None:
        self._r = r

    def __iter__(self) -> Iterator[int]:
        for n, i in enumerate(self._r):
            if n & 1023 == 0:
                _check_deadline()
            yield i

    def __reversed__(self) -> Iterator[int]:
        return iter(_GuardedRange(self._r[::-1]))

    def __len__(self) -> int:
        return len(self._r)

    def __getitem__(self, i: Any) -> Any:
        got = self._r[i]
        return _GuardedRange(got) if isinstance(got, range) else got

    def __contains__(self, x: object) -> bool:
        return x in self._r

    def __eq__(self, other: object) -> bool:
        return self._r == (other._r if isinstance(other, _GuardedRange) else other)

    def __hash__(self) -> int:
        return hash(self._r)

    def __repr__(self) -> str:
        return repr(self._r)


def _guarded_range(*args: int) -> _GuardedRange:
    _check_deadline()
    return _GuardedRange(jinja2.sandbox.safe_range(*args))


def _raise_exception(message: Any) -> None:
    # transformers raises jinja2's TemplateError; render() turns it into ours with the template's message.
    raise jinja2.exceptions.TemplateError(message)


def _tojson(x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None,
            sort_keys: bool = False) -> str:
    # Same signature and output as transformers' override (no HTML escaping, unlike jinja2's builtin).
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(format: str) -> str:
    limits = _LIMITS.get()
    now = limits.now if limits is not None and limits.now is not None else datetime.now()
    return now.strftime(format)


class _TemplateDict:
    """`dict` as templates see it: constructor and fromkeys only, no type to climb out through."""

    def __call__(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict(*args, **kwargs)

    def fromkeys(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict.fromkeys(*args, **kwargs)


class _TemplateNamespace(jinja2.utils.Namespace):
    """jinja2's Namespace refusing underscore names (as transformers does) and oversized strings."""

    def __init__(*args: Any, **kwargs: Any) -> None:
        self, rest = args[0], args[1:]
        attrs = dict(*rest, **kwargs)
        for name in attrs:
            _TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name: str, value: Any) -> None:
        _TemplateNamespace._check_name(name)
        limits = _LIMITS.get()
        if limits is not None:
            limits.check()
            if isinstance(value, (str, list)) and len(value) > limits.max_output:
                raise TemplateError("template built a value larger than the output limit")
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check_name(name: Any) -> None:
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(
                f"Chat templates cannot store underscore-prefixed attributes on a namespace, but got {name!r}. "
                "Please rename the attribute."
            )


class _GenerationExtension(jinja2.ext.Extension):
    """`{% generation %}...{% endgeneration %}` (transformers' assistant-mask tag): renders its body."""

    tags = {"generation"}  # noqa: RUF012 - jinja2 declares it a plain class attribute

    def parse(self, parser: jinja2.parser.Parser) -> jinja2.nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

    def _generation_support(self, caller: Callable[[], str]) -> str:
        return caller()


class GuardedEnvironment(ImmutableSandboxedEnvironment):
    """The transformers sandbox plus deadline checks on every call, attribute access and `+`/`*`."""

    intercepted_binops = frozenset(["*", "+"])

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        _check_deadline()
        return super().call(__context, __obj, *args, **kwargs)

    def getattr(self, obj: Any, attribute: str) -> Any:
        _check_deadline()
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        _check_deadline()
        return super().getitem(obj, argument)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        limits = _LIMITS.get()
        if limits is not None:
            limits.check()
            if operator == "*":
                for seq, n in ((left, right), (right, left)):
                    if isinstance(seq, (str, list, tuple)) and isinstance(n, int) and len(seq) * n > limits.max_output:
                        raise TemplateError("template built a value larger than the output limit")
            elif (isinstance(left, (str, list)) and isinstance(right, (str, list))
                  and len(left) + len(right) > limits.max_output):
                raise TemplateError("template built a value larger than the output limit")
        return super().call_binop(context, operator, left, right)


def make_environment(env_class: type[GuardedEnvironment] = GuardedEnvironment) -> GuardedEnvironment:
    """A fresh environment configured like transformers' chat-template environment."""
    env = env_class(trim_blocks=True, lstrip_blocks=True, extensions=[_GenerationExtension, jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.globals["dict"] = _TemplateDict()
    env.globals["namespace"] = _TemplateNamespace
    env.globals["range"] = _guarded_range
    return env


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


def _syntax_error(err: jinja2.TemplateSyntaxError, name: str) -> TemplateError:
    return TemplateError(f"{name}: syntax error at line {err.lineno}: {err.message}")


@contextlib.contextmanager
def _escape_warnings_ignored() -> Iterator[None]:
    # jinja2 decodes string literals with Python's unicode-escape codec, which warns on escapes like '\s' (hub
    # templates have them in regexes). A warning is not a syntax error, but under `-W error` (pytest's
    # filterwarnings) jinja2 turns it into one; silenced, a template compiles the same everywhere.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", SyntaxWarning)
        yield


def compile_source(env: jinja2.Environment, source: str) -> jinja2.Template:
    """`env.from_string(source)`, the same under any warning filter."""
    with _escape_warnings_ignored():
        return env.from_string(source)


def parse_source(env: jinja2.Environment, source: str) -> jinja2.nodes.Template:
    """`env.parse(source)` (the AST), the same under any warning filter."""
    with _escape_warnings_ignored():
        return env.parse(source)


def _compile(env: jinja2.Environment, source: str, name: str) -> jinja2.Template:
    try:
        return compile_source(env, source)
    except jinja2.TemplateSyntaxError as err:
        raise _syntax_error(err, name) from err
    except (RecursionError, MemoryError) as err:
        raise TemplateError(f"{name}: template too complex to compile") from err


def run_template(template: jinja2.Template, context: dict[str, Any], *, name: str = "<template>",
                 time_limit: float = DEFAULT_TIME_LIMIT, max_output: int = DEFAULT_MAX_OUTPUT,
                 now: datetime | None = None) -> str:
    """Render `template` with `context` under the guards; every failure becomes TemplateError."""
    limits = _Limits(time.monotonic() + time_limit, max_output, now)
    token = _LIMITS.set(limits)
    try:
        parts: list[str] = []
        size = 0
        for chunk in template.generate(context):
            size += len(chunk)
            if size > max_output:
                raise TemplateError(f"{name}: rendered output exceeds {max_output} characters")
            if len(parts) & 255 == 0:
                limits.check()
            parts.append(chunk)
        return "".join(parts)
    except TemplateError as err:
        if str(err).startswith(name + ":"):
            raise
        raise TemplateError(f"{name}: {err}") from err
    except jinja2.TemplateSyntaxError as err:
        raise _syntax_error(err, name) from err
    except jinja2.TemplateError as err:
        # raise_exception() lands here with the template's own message.
        raise TemplateError(f"{name}: {err.message if err.message is not None else err}") from err
    except RecursionError as err:
        raise TemplateError(f"{name}: template recursion too deep") from err
    except MemoryError as err:
        raise TemplateError(f"{name}: template ran out of memory") from err
    except Exception as err:
        raise TemplateError(f"{name}: {type(err).__name__}: {err}") from err
    finally:
        _LIMITS.reset(token)


class ChatTemplate:
    """A chat template compiled once from its source; `render` is pure and thread-safe."""

    __slots__ = ("_compiled", "max_output", "name", "raw_source", "source", "time_limit")

    def __init__(self, source: str, *, name: str = "<template>", time_limit: float = DEFAULT_TIME_LIMIT,
                 max_output: int = DEFAULT_MAX_OUTPUT) -> None:
        self.raw_source = source
        self.source = normalize_source(source)
        self.name = name
        self.time_limit = time_limit
        self.max_output = max_output
        # jinja2 applies the same normalisation itself (including the one trailing newline), so the raw text is
        # compiled: feeding it `source` would drop a second trailing newline.
        self._compiled = _compile(_ENV, source, name)

    def __setattr__(self, key: str, value: Any) -> None:
        if hasattr(self, "_compiled"):
            raise AttributeError("ChatTemplate is immutable")
        object.__setattr__(self, key, value)

    def __repr__(self) -> str:
        return f"ChatTemplate(name={self.name!r}, {len(self.source)} chars)"

    def context(self, messages: Sequence[Any], *, tools: Sequence[Any] | None = None,
                documents: Sequence[Any] | None = None, add_generation_prompt: bool = False,
                enable_thinking: bool | None = None, bos_token: str = "", eos_token: str = "",
                extra_context: Mapping[str, Any] | None = None, cpp_context: bool = False,
                **kwargs: Any) -> dict[str, Any]:
        """The variables the template sees (see the module docstring for the two conventions)."""
        extra = dict(extra_context or {})
        extra.update(kwargs)
        if not cpp_context:
            ctx: dict[str, Any] = {"bos_token": bos_token, "eos_token": eos_token}
            if enable_thinking is not None:
                ctx["enable_thinking"] = enable_thinking
            ctx.update(_plain(extra))
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
        ctx.update(_plain(extra))
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

    def render(self, messages: Sequence[Any], *, tools: Sequence[Any] | None = None,
               documents: Sequence[Any] | None = None, add_generation_prompt: bool = False,
               enable_thinking: bool | None = None, bos_token: str = "", eos_token: str = "",
               extra_context: Mapping[str, Any] | None = None, now: datetime | None = None,
               cpp_context: bool = False, add_bos: bool = False, add_eos: bool = False, **kwargs: Any) -> str:
        """Render the conversation. `now` fixes the clock `strftime_now` reads (default: real local time).

        `add_bos`/`add_eos` (C++ convention): strip a leading bos / trailing eos the tokenizer would add again.
        """
        ctx = self.context(messages, tools=tools, documents=documents, add_generation_prompt=add_generation_prompt,
                           enable_thinking=enable_thinking, bos_token=bos_token, eos_token=eos_token,
                           extra_context=extra_context, cpp_context=cpp_context, **kwargs)
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
        k = _common_prefix_len([without, with_prompt])
        suffix = with_prompt[k:]
        if k < len(without) and suffix:
            # Shared leading bytes of the first differing code points stay in the common prefix.
            x = without[k].encode("utf-8", "surrogateescape")
            y = suffix[0].encode("utf-8", "surrogateescape")
            j = _common_prefix_len([x, y])
            if j:
                return (y[j:] + suffix[1:].encode("utf-8", "surrogateescape")).decode("utf-8", "surrogateescape")
        return suffix
