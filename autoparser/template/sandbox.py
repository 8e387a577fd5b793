"""The guarded jinja2 sandbox every render runs in, whichever semantics it follows.

Templates are untrusted: the sandbox is never bypassed, `range()` is bounded (jinja2's MAX_RANGE), the
output size is bounded while it is produced, and a wall-clock deadline is checked on every call, attribute
access, range step, `+`/`*` and output chunk, so runaway templates raise TemplateError instead of hanging.
The environment's configuration mirrors `transformers.utils.chat_template_utils._cached_compile_jinja_template`
(ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, a `{% generation %}` block tag, the
non-escaping `tojson` filter, `raise_exception`, `strftime_now`, a restricted `dict` and `namespace`); the
two semantics (render.py: Hugging Face, cpp.py: llama.cpp's engine) are subclasses of it.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import os
import time
import warnings
from collections.abc import Callable, Iterator
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
    "DEFAULT_TIME_BUDGET",
    "DEFAULT_TIME_LIMIT",
    "GuardedEnvironment",
    "compile_template",
    "make_environment",
    "parse_template",
    "run_template",
    "time_budget",
]

DEFAULT_TIME_LIMIT = 10.0
DEFAULT_MAX_OUTPUT = 10_000_000
# jinja2's own limit; transformers inherits it, so parity needs the same figure.
MAX_RANGE = jinja2.sandbox.MAX_RANGE

# The wall-clock budget of one public call (generate(), an analysis, an export, a command, a corpus job's
# template): every render the call makes shares it. AUTOPARSER_TIME_BUDGET (seconds) changes the default.
DEFAULT_TIME_BUDGET = 10.0


def default_budget() -> float:
    """AUTOPARSER_TIME_BUDGET, read at each call (so a job can set it for its workers), else 10 s."""
    try:
        return float(os.environ.get("AUTOPARSER_TIME_BUDGET", "") or DEFAULT_TIME_BUDGET)
    except ValueError:
        return DEFAULT_TIME_BUDGET


class _Budget:
    """One call's budget: its deadline, what the call is doing (`phase`), and, once a render has hit a limit,
    why (`spent`): the call's other renders of the same template are then refused at once."""

    __slots__ = ("deadline", "phase", "seconds", "spent")

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds
        self.phase = "rendering"
        self.spent = ""

    def exhausted(self, why: str) -> str:
        self.spent = self.spent or f"{why} while {self.phase}"
        return self.spent


_BUDGET: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar("autoparser_time_budget", default=None)


@contextlib.contextmanager
def time_budget(seconds: float | None = None, phase: str = "") -> Iterator[None]:
    """One wall-clock budget (default `default_budget()`) for every render inside, so that a hostile template
    holds a call for that long at most, not for that long per render. A call inside another shares the
    outermost budget; `phase` names what the enclosed work is (in the error when the budget runs out)."""
    outer = _BUDGET.get()
    budget = outer if outer is not None else _Budget(default_budget() if seconds is None else seconds)
    token = _BUDGET.set(budget) if outer is None else None
    previous, budget.phase = budget.phase, phase or budget.phase
    try:
        yield
    finally:
        budget.phase = previous
        if token is not None:
            _BUDGET.reset(token)


class _Limits:
    """Per-render guard state, reachable from the environment's hooks through a context variable."""

    __slots__ = ("budget", "deadline", "max_output", "now")

    def __init__(self, deadline: float, max_output: int, now: datetime | None, budget: _Budget | None) -> None:
        self.budget = budget
        self.deadline = deadline if budget is None else min(deadline, budget.deadline)
        self.max_output = max_output
        self.now = now

    def check(self) -> None:
        if time.monotonic() > self.deadline:
            budget = self.budget
            if budget is not None and time.monotonic() > budget.deadline:
                raise TemplateError(budget.exhausted(f"the time budget of {budget.seconds:g} s ran out"))
            if budget is not None:
                budget.exhausted("a render exceeded its time limit")
            raise TemplateError("template rendering exceeded its time limit")


_LIMITS: contextvars.ContextVar[_Limits | None] = contextvars.ContextVar("autoparser_template_limits", default=None)


def _check_deadline() -> None:
    limits = _LIMITS.get()
    if limits is not None:
        limits.check()


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


# Error messages name the object a template used: for `dict.missing` transformers (jinja2's `dict` global, a
# builtin type) says "'type object' has no attribute 'missing'", and so do we.
_TemplateDict.__module__ = "builtins"
_TemplateDict.__name__ = _TemplateDict.__qualname__ = "type"


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


def _bounded(filter_fn: Callable[..., Any]) -> Callable[..., Any]:
    """A filter whose result (a string or a list) may not outgrow the output limit, as `+` and `*` may not:
    `|join` and `|list` would otherwise double a value on every loop step."""
    @functools.wraps(filter_fn)  # (keeps jinja2's pass_eval_context marker)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        out = filter_fn(*args, **kwargs)
        limits = _LIMITS.get()
        if limits is not None and isinstance(out, (str, list)) and len(out) > limits.max_output:
            raise TemplateError("template built a value larger than the output limit")
        return out
    return bounded


def make_environment(env_class: type[GuardedEnvironment] = GuardedEnvironment) -> GuardedEnvironment:
    """A fresh environment configured like transformers' chat-template environment."""
    env = env_class(trim_blocks=True, lstrip_blocks=True, extensions=[_GenerationExtension, jinja2.ext.loopcontrols])
    for name in ("join", "list"):
        env.filters[name] = _bounded(env.filters[name])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.globals["dict"] = _TemplateDict()
    env.globals["namespace"] = _TemplateNamespace
    env.globals["range"] = _guarded_range
    return env


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


@contextlib.contextmanager
def _compiling(name: str) -> Iterator[None]:
    """Compiling the same under any warning filter; a syntax error or a template too deep to compile becomes
    TemplateError."""
    try:
        with _escape_warnings_ignored():
            yield
    except jinja2.TemplateSyntaxError as err:
        raise _syntax_error(err, name) from err
    except (RecursionError, MemoryError) as err:
        raise TemplateError(f"{name}: template too complex to compile") from err
    except SyntaxError as err:  # Python's own compiler on jinja2's output: `IndentationError` from deep nesting
        raise TemplateError(f"{name}: template too deeply nested to compile ({err.msg})") from err


def parse_template(env: jinja2.Environment, source: str, name: str) -> jinja2.nodes.Template:
    """The AST of `source`."""
    with _compiling(name):
        return env.parse(source)


def compile_template(env: jinja2.Environment, source: str | jinja2.nodes.Template, name: str) -> jinja2.Template:
    """`source` (text or AST) compiled in `env`. Every compile of a chat template goes through here."""
    with _compiling(name):
        return env.from_string(source)


def run_template(template: jinja2.Template, context: dict[str, Any], *, name: str = "<template>",
                 time_limit: float = DEFAULT_TIME_LIMIT, max_output: int = DEFAULT_MAX_OUTPUT,
                 now: datetime | None = None) -> str:
    """Render `template` with `context` under the guards; every failure becomes TemplateError."""
    budget = _BUDGET.get()
    if budget is not None and budget.spent:  # a render of this call hit a limit already: not once per probe
        raise TemplateError(f"{name}: not rendered: {budget.spent}")
    limits = _Limits(time.monotonic() + time_limit, max_output, now, budget)
    token = _LIMITS.set(limits)
    try:
        limits.check()  # (a budget spent by the renders before this one)
        parts: list[str] = []
        size = 0
        for chunk in template.generate(context):
            size += len(chunk)
            if size > max_output:
                if budget is not None:
                    budget.exhausted(f"a render exceeded {max_output} characters")
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
        if budget is not None:
            budget.exhausted("a render ran out of memory")
        raise TemplateError(f"{name}: template ran out of memory") from err
    except Exception as err:
        raise TemplateError(f"{name}: {type(err).__name__}: {err}") from err
    finally:
        _LIMITS.reset(token)

