"""The llama.cpp flavour of jinja: one environment for capability probing and for the analyzer's renders.

llama.cpp renders templates with its own jinja engine (common/jinja/runtime.cpp, value.cpp, caps.cpp). Where
it is more lenient than jinja2, templates render there and fail here, or print something else; the analyzer
and the capability probes must see what the C++ sees. This environment adapts jinja2 in one place:

* list/dict mutators (`ids.append(x)`) are allowed (transformers' immutable sandbox refuses them);
* `+` with a string concatenates anything, null and undefined counting as "" (runtime.cpp's
  `workaround_concat_null_with_str`); members and items of undefined values stay undefined, and the
  builtins of the undefined value (`missing.strip()`) answer with empty values;
* `{{ value }}` prints what the C++ prints (no repr of objects or None); `map`/`select`/... return lists;
* macro arguments are bound the way the C++ `bind_parameters` binds them;
* `x | selectattr(a, b)` means "items passing test `a` with argument `b`", as the C++ reads it;
* filters the C++ object or string value does not have raise on objects and strings.

The C++ engine also records, for every input value, whether the template used it and which operations it
applied (the value `stats` `caps_get` reads). Here the inputs of a probe are tracked copies (`track`): str,
list and dict subclasses carrying a `Stats` record, filled by the environment's hooks while `recording()`
is active; outside a probe the hooks record nothing.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Callable, Iterator
from typing import Any, cast

import jinja2
import jinja2.nodes
import jinja2.runtime
import jinja2.sandbox
import jinja2.utils

from autoparser.template.sandbox import (
    DEFAULT_MAX_OUTPUT,
    DEFAULT_TIME_LIMIT,
    GuardedEnvironment,
    compile_template,
    make_environment,
    parse_template,
)

__all__ = ["CPP_ENV", "CppEnvironment", "Stats", "compile_cpp", "recording", "stats_of", "track",
           "tracked_variable", "transformers_reading", "untracked"]


# --- usage tracking -------------------------------------------------------------------------------------------

class Stats:
    """What a template did with one input value: used it at all, and which operations it applied."""

    __slots__ = ("ops", "used")

    def __init__(self) -> None:
        self.used = False
        self.ops: set[str] = set()


class _Tracker:
    """Active while a probe renders; `suspended` > 0 inside builtin filters/tests (the C++ builtins don't record)."""

    __slots__ = ("suspended",)

    def __init__(self) -> None:
        self.suspended = 0


_TRACKER: contextvars.ContextVar[_Tracker | None] = contextvars.ContextVar("autoparser_caps_tracker", default=None)


@contextlib.contextmanager
def recording() -> Iterator[None]:
    """Record the uses of tracked values while the block runs (one probe render)."""
    token = _TRACKER.set(_Tracker())
    try:
        yield
    finally:
        _TRACKER.reset(token)


def _recording() -> bool:
    tracker = _TRACKER.get()
    return tracker is not None and tracker.suspended == 0


_TRANSFORMERS_READING: contextvars.ContextVar[bool] = contextvars.ContextVar("autoparser_transformers_reading",
                                                                            default=False)


@contextlib.contextmanager
def transformers_reading() -> Iterator[None]:
    """Render as transformers does where the C++ engine fails the template: while the block runs, the C++'s
    refusals are off (`selectattr(a, b)` is attribute `a`, test `b`; every jinja2 filter applies to objects and
    strings; a string may be iterated; a namespace's key `items`, `keys`, `values` or `get` is the key, not the
    builtin), and the rest of the C++ flavour and the usage tracking stay. For
    templates llama.cpp's jinja renders not at all, or without their calls (analysis/analyzer.py: the analysis
    beyond the C++)."""
    token = _TRANSFORMERS_READING.set(True)
    try:
        yield
    finally:
        _TRANSFORMERS_READING.reset(token)


def in_transformers_reading() -> bool:
    """Whether the template is being read as transformers renders it (`transformers_reading`)."""
    return _TRANSFORMERS_READING.get()


def stats_of(value: Any) -> Stats:
    """The stats of a tracked value (a fresh, empty record for anything else)."""
    if isinstance(value, (_TStr, _TList, _TDict)):
        return value._st
    return Stats()


def _mark(value: Any, op: str | None = None) -> None:
    if isinstance(value, (_TStr, _TList, _TDict)) and _recording():
        value._st.used = True
        if op is not None:
            value._st.ops.add(op)


def _mark_deep(value: Any, depth: int = 0) -> None:
    """`tojson`/`string` mark the whole value tree used (through plain containers built by filters too)."""
    if depth > 64:
        return
    _mark(value)
    if isinstance(value, dict):
        for item in dict.values(value):
            _mark_deep(item, depth + 1)
    elif isinstance(value, (list, tuple)):
        for item in list.__iter__(value) if isinstance(value, list) else value:
            _mark_deep(item, depth + 1)


class _TStr(str):
    """A string whose uses are recorded; iterating it in a `for` fails, as it does in the C++ engine.

    Printing or testing the truthiness of a nested string does not count as a use: the C++ marks values on
    identifier lookup and member access, and a string reached through a call (`msg.get('content')`) and
    printed is never marked there.
    """

    _st: Stats

    def __eq__(self, other: object) -> bool:
        _mark(self)
        return str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        _mark(self)
        return str.__ne__(self, other)

    __hash__ = str.__hash__

    def __contains__(self, item: object) -> bool:
        _mark(self)
        return str.__contains__(self, item)  # type: ignore[operator]

    def __iter__(self) -> Iterator[str]:
        if _recording() and not _TRANSFORMERS_READING.get():
            _mark(self, "array_access")
            raise TypeError("Expected iterable or object type in for loop: got String")
        return str.__iter__(self)


class _TVarStr(_TStr):
    """A string bound directly to a context variable: every use of it goes through an identifier lookup in
    the C++ engine, which marks it used, so printing and truthiness count too."""

    def __str__(self) -> str:
        _mark(self)
        return str.__str__(self)

    def __len__(self) -> int:
        _mark(self)
        return str.__len__(self)


class _TList(list[Any]):
    __slots__ = ("_st",)
    _st: Stats

    def __iter__(self) -> Iterator[Any]:
        _mark(self, "array_access")
        return list.__iter__(self)

    def __len__(self) -> int:
        _mark(self)
        return list.__len__(self)


def _loop_variable(value: Any) -> Any:
    """`value` as a loop binds it to a name (`for key, value in args.items()`): the C++ marks a string used at
    every lookup of that name, so printing it counts, as for a context variable (same stats record). (Only
    `items()`/`values()` hand values out this way: list items are also reached by filters such as `join`, which
    the C++ does not count as a use; measured on the corpus, lists need no such rule.)"""
    if type(value) is _TStr:
        out = _TVarStr(value)
        out._st = value._st
        return out
    return value


class _TDict(dict[Any, Any]):
    __slots__ = ("_st",)
    _st: Stats

    def __iter__(self) -> Iterator[Any]:
        if _recording():
            _mark(self, "array_access")
            _mark(self, "object_access")
        return dict.__iter__(self)

    def items(self) -> Any:
        return [(k, _loop_variable(v)) for k, v in dict.items(self)]

    def values(self) -> Any:
        return [_loop_variable(v) for v in dict.values(self)]

    def __len__(self) -> int:
        _mark(self)
        return dict.__len__(self)


def track(value: Any) -> Any:
    """A tracked deep copy of a JSON-like value (every str/list/dict gets its own stats record)."""
    out: Any
    if isinstance(value, str):
        out = _TStr(value)
    elif isinstance(value, list):
        out = _TList(track(v) for v in value)
    elif isinstance(value, dict):
        out = _TDict((k, track(v)) for k, v in value.items())
    else:
        return value
    out._st = Stats()
    return out


def tracked_variable(value: str) -> str:
    """A tracked string to bind directly to a context variable (any use of the variable counts)."""
    out = _TVarStr(value)
    out._st = Stats()
    return out


def untracked(value: Any) -> Any:
    """Plain copy, used where Python internals would trip the tracked types' hooks."""
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, dict):
        return {k: untracked(v) for k, v in dict.items(value)}
    if isinstance(value, list):
        return [untracked(v) for v in list.__iter__(value)]
    if isinstance(value, tuple):
        return tuple(untracked(v) for v in value)
    return value


class _Suspend:
    def __enter__(self) -> None:
        tracker = _TRACKER.get()
        if tracker is not None:
            tracker.suspended += 1

    def __exit__(self, *exc: object) -> None:
        tracker = _TRACKER.get()
        if tracker is not None:
            tracker.suspended -= 1


# --- filters and tests ----------------------------------------------------------------------------------------

# The only filters the C++ engine accepts on an object or a string (value_object_t / value_string_t builtins);
# any other raises there ("Unknown (built-in) filter"), e.g. `selectattr` on a string.
_OBJECT_FILTERS = frozenset(["get", "keys", "values", "items", "tojson", "string", "length", "dictsort", "join"])
_STRING_FILTERS = frozenset(["default", "upper", "lower", "strip", "rstrip", "lstrip", "title", "capitalize", "length",
                             "startswith", "endswith", "split", "rsplit", "replace", "format", "int", "float",
                             "string", "slice", "safe", "tojson", "indent", "join", "wordcount"])

_FILTER_ALIASES = {"count": "length", "d": "default", "e": "escape", "trim": "strip"}


def _wrap_filter(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    pass_arg = getattr(fn, "jinja_pass_arg", None)
    skip = 0 if pass_arg is None else 1
    op = _FILTER_ALIASES.get(name, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if len(args) > skip:
            value = args[skip]
            cpp = not _TRANSFORMERS_READING.get()
            if cpp and isinstance(value, dict) and op not in _OBJECT_FILTERS:
                _mark(value, op)
                raise jinja2.TemplateRuntimeError(f"Unknown (built-in) filter '{op}' for type Object")
            if cpp and isinstance(value, str) and op not in _STRING_FILTERS:
                _mark(value, op)
                raise jinja2.TemplateRuntimeError(f"Unknown (built-in) filter '{op}' for type String")
            if op == "tojson" and isinstance(value, Iterator):
                # jinja2's map/select return generators where the C++ builtins return arrays.
                with _Suspend():
                    value = list(value)
            _mark(value, op)
            if (op == "tojson" or (op == "string" and isinstance(value, (list, dict)))) and _recording():
                _mark_deep(value)
            if op == "tojson":
                args = (*args[:skip], untracked(value), *args[skip + 1:])
            if cpp and op in ("selectattr", "rejectattr") and len(args) == skip + 3 and not kwargs:
                return _cpp_select_by_test(args[skip], args[skip + 1], args[skip + 2], reject=op == "rejectattr")
        with _Suspend():
            return fn(*args, **kwargs)

    if pass_arg is not None:
        wrapper.jinja_pass_arg = pass_arg  # type: ignore[attr-defined]
    return wrapper


def _cpp_select_by_test(items: Any, test_name: Any, test_arg: Any, *, reject: bool) -> list[Any]:
    """The C++ reads `x | selectattr(a, b)` as "items passing test `a` with argument `b`" (jinja2: attribute a,
    test b), so `selectattr('text', 'defined')` fails there with an unknown test 'text'."""
    test = cast("Callable[..., Any] | None", CPP_ENV.tests.get(test_name) if isinstance(test_name, str) else None)
    if test is None:
        raise jinja2.TemplateRuntimeError(f"selectattr: unknown test '{test_name}'")
    with _Suspend():
        return [item for item in items if bool(test(item, test_arg)) != reject]


def _wrap_test(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    op = "test_is_" + name

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if args:
            _mark(args[0], op)
        with _Suspend():
            return fn(*args, **kwargs)

    pass_arg = getattr(fn, "jinja_pass_arg", None)
    if pass_arg is not None:
        wrapper.jinja_pass_arg = pass_arg  # type: ignore[attr-defined]
    return wrapper


def _listing(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Make a lazy jinja2 filter eager: the C++ filters return arrays, which `tojson` can serialise."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return list(fn(*args, **kwargs))

    return wrapper


def _cpp_safe(value: Any) -> Any:
    # No autoescaping in the C++ engine: `safe` must not turn the value into Markup, which would escape every
    # string later concatenated to it.
    return str(value) if isinstance(value, str) else value


# --- macros ---------------------------------------------------------------------------------------------------

# macro name -> number of parameters with a default, for the template being rendered (jinja2's Macro hides it)
_MACRO_DEFAULTS: contextvars.ContextVar[dict[str, int]] = contextvars.ContextVar("autoparser_macro_defaults",
                                                                                 default={})  # noqa: B039


def _macro_defaults(ast: jinja2.nodes.Template) -> dict[str, int]:
    out: dict[str, int] = {}
    for node in ast.find_all(jinja2.nodes.Macro):
        out.setdefault(node.name, len(node.defaults))
    return out


def _cpp_macro_binding(env: jinja2.Environment, macro: jinja2.runtime.Macro, args: tuple[Any, ...],
                       kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Bind macro arguments the way the C++ `bind_parameters` does.

    Parameter i takes the keyword of its name or else positional argument i, but only while i is below the
    total number of arguments given; later parameters get their defaults even when passed by keyword.
    """
    # jinja2 threads its own bookkeeping through call kwargs; those are not template arguments.
    internal: dict[str, Any] = {k: kwargs.pop(k) for k in ("_loop_vars", "_block_vars") if k in kwargs}
    total = len(args) + len(kwargs)
    required = len(macro.arguments) - _MACRO_DEFAULTS.get().get(macro.name, len(macro.arguments))
    if not kwargs and len(args) >= len(macro.arguments):
        return args, internal
    bound: list[Any] = []
    for i, param in enumerate(macro.arguments):
        if i >= total:
            if i < required:
                raise jinja2.TemplateRuntimeError(f"Not enough arguments provided to '{macro.name}'")
            break
        if param in kwargs:
            bound.append(kwargs[param])
        elif i < len(args):
            bound.append(args[i])
        else:
            bound.append(env.undefined(name=param))
    return tuple(bound), internal


class CppTemplate(jinja2.Template):
    """A template compiled in the C++-flavour environment (`compile_cpp`), with the name and limits its renders
    run under; it knows its macros' defaults while it renders."""

    macro_defaults: dict[str, int] = {}  # noqa: RUF012 - replaced per template by compile_cpp
    time_limit: float = DEFAULT_TIME_LIMIT
    max_output: int = DEFAULT_MAX_OUTPUT

    def generate(self, *args: Any, **kwargs: Any) -> Iterator[str]:
        token = _MACRO_DEFAULTS.set(self.macro_defaults)
        try:
            yield from super().generate(*args, **kwargs)
        finally:
            _MACRO_DEFAULTS.reset(token)


# --- undefined values and printing ----------------------------------------------------------------------------

# Builtins the C++ undefined value answers (with an empty value of the builtin's type).
_UNDEFINED_BUILTINS = frozenset(
    ["default", "capitalize", "first", "items", "join", "last", "length", "list", "lower", "map", "max", "min",
     "reject", "rejectattr", "replace", "reverse", "safe", "select", "selectattr", "sort", "string", "strip", "sum",
     "title", "truncate", "unique", "upper", "wordcount"]
)


class _UndefinedBuiltin(jinja2.ChainableUndefined):
    """`undefined.strip` and friends: callable in the C++ engine, returning an empty value."""

    __slots__ = ()


def _as_string(value: Any) -> str:
    if value is None or isinstance(value, jinja2.Undefined):
        return ""
    return str(value)


def _cpp_output(value: Any) -> Any:
    """What `{{ value }}` prints in the C++ engine: strings, numbers and booleans; arrays print their items
    (recursively); objects, null and undefined print nothing (jinja2 would print a repr or "None")."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, (list, tuple)):
        # printing does not go through the value's stats in the C++ (gather_string_parts_recursive)
        with _Suspend():
            return "".join(str(_cpp_output(v)) for v in value)
    return ""


# --- the environment ------------------------------------------------------------------------------------------

def _read(fetch: Callable[[], Any]) -> Any:
    """A member or item as the template reads it: the lookup itself records nothing, the value is used."""
    with _Suspend():
        value = fetch()
    _mark(value)
    return value


class CppEnvironment(GuardedEnvironment):
    """The guarded sandbox with the C++ engine's leniencies, recording member access the way the C++
    `member_expression` does (only while a probe records)."""

    template_class = CppTemplate

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        # list/dict mutators are allowed; every other sandbox rule still applies.
        return jinja2.sandbox.SandboxedEnvironment.is_safe_attribute(self, obj, attr, value)

    def getattr(self, obj: Any, attribute: str) -> Any:
        if isinstance(obj, jinja2.Undefined) and attribute in _UNDEFINED_BUILTINS:
            return _UndefinedBuiltin(name=attribute)
        if isinstance(obj, jinja2.utils.Namespace) and attribute in ("get", "keys", "values", "items") \
                and not _TRANSFORMERS_READING.get():
            # A C++ namespace is an object whose builtins shadow its keys on `ns.prop` (`ns.items` is a function;
            # in jinja2, as transformers renders, `namespace(items=[])` has a key `items`).
            attrs: dict[str, Any] = object.__getattribute__(obj, "_Namespace__attrs")
            return getattr(dict(attrs), attribute)
        # obj.prop: the C++ first looks for a builtin named prop (recording it as an op), then reads the key.
        _mark(obj, attribute)
        _mark(obj, "object_access")
        return _read(lambda: super(CppEnvironment, self).getattr(obj, attribute))

    def getitem(self, obj: Any, argument: Any) -> Any:
        if isinstance(argument, slice):
            _mark(obj, "slice")
        elif isinstance(argument, (bool, int)):
            _mark(obj, "array_access")
        else:
            if isinstance(argument, str) and not isinstance(obj, dict):
                _mark(obj, argument)
            _mark(obj, "object_access")
        return _read(lambda: super(CppEnvironment, self).getitem(obj, argument))

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(__obj, _UndefinedBuiltin):
            # `missing.strip()`: the C++ undefined value answers its builtins with empty values.
            return __self.undefined()
        if isinstance(__obj, jinja2.runtime.Macro):
            args, kwargs = _cpp_macro_binding(__self, __obj, args, kwargs)
        return super().call(__context, __obj, *args, **kwargs)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        _mark(left)
        _mark(right)
        if operator == "+":
            # null or undefined next to a string counts as "" (runtime.cpp: workaround_concat_null_with_str)
            if isinstance(left, str) and (right is None or isinstance(right, jinja2.Undefined)):
                return left
            if isinstance(right, str) and (left is None or isinstance(left, jinja2.Undefined)):
                return right
        with _Suspend():
            try:
                return super().call_binop(context, operator, left, right)
            except (TypeError, jinja2.UndefinedError):
                # A string concatenates with anything (value::as_string); jinja2 raises.
                if operator != "+" or not (isinstance(left, str) or isinstance(right, str)):
                    raise
                return _as_string(left) + _as_string(right)


def _make_cpp_environment() -> CppEnvironment:
    env = make_environment(CppEnvironment)
    assert isinstance(env, CppEnvironment)
    # Member access on an undefined value yields undefined in the C++ engine (jinja2 raises).
    env.undefined = jinja2.ChainableUndefined
    env.finalize = _cpp_output
    # jinja2's compile-time constant folding only changes speed, and compiling is the analyzer's main cost.
    env.optimized = False
    for name in ("map", "select", "reject", "selectattr", "rejectattr"):
        env.filters[name] = _listing(env.filters[name])
    env.filters["safe"] = _cpp_safe
    for name, fn in list(env.filters.items()):
        env.filters[name] = _wrap_filter(name, fn)
    for name, fn in list(env.tests.items()):
        env.tests[name] = _wrap_test(name, cast("Callable[..., Any]", fn))
    return env


CPP_ENV = _make_cpp_environment()


def compile_cpp(source: str, name: str = "<template>", *, time_limit: float = DEFAULT_TIME_LIMIT,
                max_output: int = DEFAULT_MAX_OUTPUT) -> CppTemplate:
    """`source` compiled in the C++-flavour environment (syntax errors raise TemplateError, as the renderer's)."""
    ast = parse_template(CPP_ENV, source, name)
    compiled = compile_template(CPP_ENV, ast, name)
    assert isinstance(compiled, CppTemplate)
    compiled.name = name
    compiled.macro_defaults = _macro_defaults(ast)
    compiled.time_limit = time_limit
    compiled.max_output = max_output
    return compiled
