"""Template capability probing, equal to llama.cpp's `jinja::caps_get` (SPEC 4.2).

The C++ engine renders a few probe conversations while recording, for every input value, whether the
template *used* it and which *ops* it applied (`test_is_<name>`, filter/method names, `array_access`,
`object_access`). We reproduce that on top of jinja2 with tracked input values: `dict`, `list` and `str`
subclasses carrying a stats record, and an environment whose attribute/item access, filters, tests and
`+`/`*` record into those stats. Where the two engines differ in what they can observe, the tracked types
approximate the C++ rule (a C++ identifier lookup marks a value used; here printing, comparing, testing or
taking the truthiness of a tracked string does). Known remaining gaps are listed in tests/data/ratchet/caps.json.
"""

from __future__ import annotations

import contextvars
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any, cast

import jinja2
import jinja2.runtime
import jinja2.sandbox
import jinja2.utils

from autoparser.errors import TemplateError
from autoparser.template.render import (
    ChatTemplate,
    GuardedEnvironment,
    compile_source,
    make_environment,
    parse_source,
    run_template,
)

__all__ = ["TemplateCaps", "normalize_messages", "template_caps"]


@dataclasses.dataclass(frozen=True)
class TemplateCaps:
    """What a template can express; field names are those of the C++ `caps` record."""

    supports_tools: bool = True
    supports_tool_calls: bool = True
    supports_system_role: bool = True
    supports_parallel_tool_calls: bool = True
    supports_string_content: bool = True
    supports_typed_content: bool = False
    supports_object_arguments: bool = False
    supports_preserve_reasoning: bool = False
    supports_reasoning_effort: bool = False

    def to_dict(self) -> dict[str, bool]:
        return dataclasses.asdict(self)


class _Stats:
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


def _recording() -> bool:
    tracker = _TRACKER.get()
    return tracker is not None and tracker.suspended == 0


def _stats_of(value: Any) -> _Stats | None:
    if isinstance(value, (_TStr, _TList, _TDict)):
        return value._st
    return None


def _mark(value: Any, op: str | None = None) -> None:
    st = _stats_of(value)
    if st is not None and _recording():
        st.used = True
        if op is not None:
            st.ops.add(op)


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

    _st: _Stats

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
        if _recording():
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
    _st: _Stats

    def __iter__(self) -> Iterator[Any]:
        _mark(self, "array_access")
        return list.__iter__(self)

    def __len__(self) -> int:
        _mark(self)
        return list.__len__(self)


class _TDict(dict[Any, Any]):
    __slots__ = ("_st",)
    _st: _Stats

    def __iter__(self) -> Iterator[Any]:
        if _recording():
            _mark(self, "array_access")
            _mark(self, "object_access")
        return dict.__iter__(self)

    def __len__(self) -> int:
        _mark(self)
        return dict.__len__(self)


def _track(value: Any) -> Any:
    """A tracked deep copy of a JSON-like value (every str/list/dict gets its own stats record)."""
    out: Any
    if isinstance(value, str):
        out = _TStr(value)
    elif isinstance(value, list):
        out = _TList(_track(v) for v in value)
    elif isinstance(value, dict):
        out = _TDict((k, _track(v)) for k, v in value.items())
    else:
        return value
    out._st = _Stats()
    return out


def _untracked(value: Any) -> Any:
    """Plain copy, used where Python internals would trip the tracked types' hooks."""
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, dict):
        return {k: _untracked(v) for k, v in dict.items(value)}
    if isinstance(value, list):
        return [_untracked(v) for v in list.__iter__(value)]
    if isinstance(value, tuple):
        return tuple(_untracked(v) for v in value)
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


# The only filters the C++ engine accepts on an object (value_object_t builtins); any other raises there.
_OBJECT_FILTERS = frozenset(["get", "keys", "values", "items", "tojson", "string", "length", "dictsort", "join"])

_FILTER_ALIASES = {"count": "length", "d": "default", "e": "escape", "trim": "strip"}


def _wrap_filter(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    pass_arg = getattr(fn, "jinja_pass_arg", None)
    skip = 0 if pass_arg is None else 1
    op = _FILTER_ALIASES.get(name, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if len(args) > skip:
            value = args[skip]
            if isinstance(value, dict) and op not in _OBJECT_FILTERS:
                _mark(value, op)
                raise jinja2.TemplateRuntimeError(f"Unknown (built-in) filter '{op}' for type Object")
            if op == "tojson" and isinstance(value, Iterator):
                # jinja2's map/select return generators where the C++ builtins return arrays.
                with _Suspend():
                    value = list(value)
            _mark(value, op)
            if (op == "tojson" or (op == "string" and isinstance(value, (list, dict)))) and _recording():
                _mark_deep(value)
            if op == "tojson":
                args = (*args[:skip], _untracked(value), *args[skip + 1:])
            if op in ("selectattr", "rejectattr") and len(args) == skip + 3 and not kwargs:
                return _cpp_select_by_test(args[skip], args[skip + 1], args[skip + 2], reject=op == "rejectattr")
        with _Suspend():
            return fn(*args, **kwargs)

    if pass_arg is not None:
        wrapper.jinja_pass_arg = pass_arg  # type: ignore[attr-defined]
    return wrapper


def _cpp_select_by_test(items: Any, test_name: Any, test_arg: Any, *, reject: bool) -> list[Any]:
    """The C++ reads `x | selectattr(a, b)` as "items passing test `a` with argument `b`" (jinja2: attribute a,
    test b), so `selectattr('text', 'defined')` fails there with an unknown test 'text'."""
    test = cast("Callable[..., Any] | None", _STATS_ENV.tests.get(test_name) if isinstance(test_name, str) else None)
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


# macro name -> number of parameters with a default, for the template being probed (jinja2's Macro hides it)
_MACRO_DEFAULTS: contextvars.ContextVar[dict[str, int]] = contextvars.ContextVar("autoparser_macro_defaults",
                                                                                 default={})  # noqa: B039


def _macro_defaults(source: str) -> dict[str, int]:
    import jinja2.nodes

    out: dict[str, int] = {}
    for node in parse_source(_STATS_ENV, source).find_all(jinja2.nodes.Macro):
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


# Builtins the C++ undefined value answers (with an empty value of the builtin's type).
_UNDEFINED_BUILTINS = frozenset(
    ["default", "capitalize", "first", "items", "join", "last", "length", "list", "lower", "map", "max", "min", "reject", "rejectattr", "replace", "reverse", "safe", "select", "selectattr", "sort", "string", "strip", "sum", "title", "truncate", "unique", "upper", "wordcount"]
)


class _UndefinedBuiltin(jinja2.ChainableUndefined):
    """`undefined.strip` and friends: callable in the C++ engine, returning an empty value."""


def _as_string(value: Any) -> str:
    if isinstance(value, jinja2.Undefined):
        return ""
    return str(value)


class _StatsEnvironment(GuardedEnvironment):
    """Records member access the way the C++ `member_expression` does.

    Unlike transformers' immutable sandbox, list/dict mutators (`ids.append(x)`) are allowed: the C++ engine
    supports them, and templates like Kimi-K2 rely on them while rendering tool calls. Every other sandbox
    rule still applies.
    """

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        return jinja2.sandbox.SandboxedEnvironment.is_safe_attribute(self, obj, attr, value)

    def getattr(self, obj: Any, attribute: str) -> Any:
        if isinstance(obj, jinja2.Undefined) and attribute in _UNDEFINED_BUILTINS:
            return _UndefinedBuiltin(name=attribute)
        if isinstance(obj, jinja2.utils.Namespace) and attribute in ("get", "keys", "values", "items"):
            # A C++ namespace is an object whose builtins shadow its keys on `ns.prop` (`ns.items` is a function).
            attrs: dict[str, Any] = object.__getattribute__(obj, "_Namespace__attrs")
            return getattr(dict(attrs), attribute)
        # obj.prop: the C++ first looks for a builtin named prop (recording it as an op), then reads the key.
        _mark(obj, attribute)
        _mark(obj, "object_access")
        with _Suspend():
            value = super().getattr(obj, attribute)
        _mark(value)
        return value

    def getitem(self, obj: Any, argument: Any) -> Any:
        if isinstance(argument, slice):
            _mark(obj, "slice")
        elif isinstance(argument, (bool, int)):
            _mark(obj, "array_access")
        else:
            if isinstance(argument, str) and not isinstance(obj, dict):
                _mark(obj, argument)
            _mark(obj, "object_access")
        with _Suspend():
            value = super().getitem(obj, argument)
        _mark(value)
        return value

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
        with _Suspend():
            try:
                return super().call_binop(context, operator, left, right)
            except (TypeError, jinja2.UndefinedError):
                # The C++ engine concatenates a string with anything (undefined counts as ""); jinja2 raises.
                if operator != "+" or not (isinstance(left, str) or isinstance(right, str)):
                    raise
                return _as_string(left) + _as_string(right)


def _make_stats_environment() -> _StatsEnvironment:
    env = make_environment(_StatsEnvironment)
    assert isinstance(env, _StatsEnvironment)
    # The C++ engine returns undefined for members/items of undefined values instead of raising.
    env.undefined = jinja2.ChainableUndefined
    for name, fn in list(env.filters.items()):
        env.filters[name] = _wrap_filter(name, fn)
    for name, fn in list(env.tests.items()):
        env.tests[name] = _wrap_test(name, cast("Callable[..., Any]", fn))
    return env


_STATS_ENV = _make_stats_environment()

_CONTENT_MARKER = "STRING_MARKER"
_REASONING_PLACEHOLDER = "<REASONING_CONTENT_PLACEHOLDER>"
_PROBE_TIME_LIMIT = 5.0


def _probe_tools() -> list[Any]:
    return [{
        "name": "tool",
        "type": "function",
        "function": {
            "name": "tool1",
            "description": "Tool description",
            "parameters": {
                "type": "object",
                "properties": {"arg": {"type": "string", "description": "Arg description"}},
                "required": ["arg"],
            },
        },
    }]


def _tool_conversation(arguments: Any, calls: int) -> list[Any]:
    tool_calls = [
        {"id": f"call0000{i + 1}", "type": "function", "function": {"name": "tool1", "arguments": arguments}}
        for i in range(calls)
    ]
    return [
        {"role": "user", "content": "User message"},
        {"role": "assistant", "content": "", "tool_calls": tool_calls},
        {"role": "tool", "content": "Tool response", "tool_call_id": "call00001"},
        {"role": "assistant", "content": "The tool response was 'tool response'"},
        {"role": "user", "content": "User message"},
    ]


class _Probe:
    __slots__ = ("ctx", "messages", "output", "success", "tools")

    def __init__(self, compiled: Any, name: str, messages: list[Any], tools: list[Any] | None = None,
                 extra: dict[str, Any] | None = None) -> None:
        self.messages = _track(messages)
        self.tools = _track(tools if tools is not None else [])
        self.ctx: dict[str, Any] = {
            "messages": self.messages,
            "tools": self.tools,
            "bos_token": "",
            "eos_token": "",
            "add_generation_prompt": True,
        }
        self.ctx.update(extra or {})
        token = _TRACKER.set(_Tracker())
        try:
            self.output = run_template(compiled, self.ctx, name=name, time_limit=_PROBE_TIME_LIMIT)
            self.success = True
        except TemplateError:
            self.output = ""
            self.success = False
        finally:
            _TRACKER.reset(token)


def _st(value: Any) -> _Stats:
    st = _stats_of(value)
    return st if st is not None else _Stats()


def _at(value: Any, *path: Any) -> Any:
    for key in path:
        value = dict.__getitem__(value, key) if isinstance(value, dict) else list.__getitem__(value, key)
    return value


def template_caps(template: ChatTemplate | str, name: str = "<template>") -> TemplateCaps:
    """Probe a template's capabilities (never raises for render failures; syntax errors raise TemplateError)."""
    source = template.raw_source if isinstance(template, ChatTemplate) else template
    if isinstance(template, ChatTemplate):
        name = template.name
    try:
        compiled = compile_source(_STATS_ENV, source)
    except Exception as err:
        ChatTemplate(source, name=name)  # raises the same TemplateError the renderer would
        raise TemplateError(f"{name}: {err}") from err

    token = _MACRO_DEFAULTS.set(_macro_defaults(source))
    try:
        return _probe_all(compiled, name)
    finally:
        _MACRO_DEFAULTS.reset(token)


def _probe_all(compiled: Any, name: str) -> TemplateCaps:
    caps: dict[str, bool] = TemplateCaps().to_dict()

    # 1. typed content: string content the template treats as an array.
    p = _Probe(compiled, name, [{"role": "user", "content": _CONTENT_MARKER}])
    content = _st(_at(p.messages, 0, "content"))
    checks_for_string = "test_is_string" in content.ops
    used_as_array = "selectattr" in content.ops or "array_access" in content.ops
    if used_as_array:
        caps["supports_typed_content"] = True
    if not p.success or (used_as_array and _CONTENT_MARKER not in p.output):
        caps["supports_string_content"] = False

    # 2. if the template asked "is string", see whether it handles an (empty) array.
    if checks_for_string:
        p = _Probe(compiled, name, [{"role": "user", "content": []}])
        content = _st(_at(p.messages, 0, "content"))
        if p.success and ("selectattr" in content.ops or "array_access" in content.ops):
            caps["supports_typed_content"] = True

    # 3. system role: the system message's content must be read.
    p = _Probe(compiled, name, [{"role": "system", "content": "System message"},
                                {"role": "user", "content": "User message"}])
    if not _st(_at(p.messages, 0, "content")).used:
        caps["supports_system_role"] = False

    # 4. one tool call with object arguments.
    p = _Probe(compiled, name, _tool_conversation({"arg": "value"}, 1), _probe_tools())
    if p.success:
        if not _st(_at(p.tools, 0, "function", "name")).used:
            caps["supports_tools"] = False
        tool_calls = _at(p.messages, 1, "tool_calls")
        if not _st(tool_calls).used:
            caps["supports_tool_calls"] = False
        elif _st(_at(tool_calls, 0, "function", "arguments", "arg")).used:
            caps["supports_object_arguments"] = True

    # 5. the same with arguments as a JSON string.
    if not caps["supports_object_arguments"]:
        p = _Probe(compiled, name, _tool_conversation('{"arg": "value"}', 1), _probe_tools())
        if not p.success:
            caps["supports_tool_calls"] = False
            caps["supports_tools"] = False
        else:
            if not _st(_at(p.tools, 0, "function", "name")).used:
                caps["supports_tools"] = False
            if not _st(_at(p.messages, 1, "tool_calls")).used:
                caps["supports_tool_calls"] = False

    # 6. parallel calls: the second call must be read.
    args: Any = {"arg": "value"} if caps["supports_object_arguments"] else '{"arg": "value"}'
    p = _Probe(compiled, name, _tool_conversation(args, 2), _probe_tools())
    if not p.success or not _st(_at(p.messages, 1, "tool_calls", 1, "function")).used:
        caps["supports_parallel_tool_calls"] = False

    # 7. reasoning kept in history (judged on the output: a test on reasoning_content is not enough).
    p = _Probe(compiled, name, [
        {"role": "user", "content": "User message"},
        {"role": "assistant", "content": "Assistant message", "reasoning_content": _REASONING_PLACEHOLDER},
        {"role": "user", "content": "User message"},
        {"role": "assistant", "content": "Assistant message", "reasoning_content": "Reasoning content"},
        {"role": "user", "content": "User message"},
    ], extra={"enable_thinking": True, "preserve_thinking": True, "clear_thinking": False,
              "truncate_history_thinking": False, "drop_thinking": False})
    if _REASONING_PLACEHOLDER in p.output:
        caps["supports_preserve_reasoning"] = True

    # 8. reasoning effort: one value bound to both names, so either spelling counts.
    effort = _TVarStr("low")
    effort._st = _Stats()
    p = _Probe(compiled, name, [{"role": "user", "content": "User message"}],
               extra={"enable_thinking": True, "reasoning_effort": effort, "reasoning_strength": effort})
    caps["supports_reasoning_effort"] = _st(effort).used

    return TemplateCaps(**caps)


def _concat_content_parts(parts: list[Any]) -> str:
    # Text parts are joined by newlines, except next to media markers; other part types are dropped.
    text = ""
    last_was_media_marker = False
    for part in parts:
        kind = part.get("type", "") if isinstance(part, dict) else ""
        if kind == "text":
            add_new_line = not last_was_media_marker and text != ""
            last_was_media_marker = False
        elif kind == "media_marker":
            add_new_line = False
            last_was_media_marker = True
        else:
            continue
        if add_new_line:
            text += "\n"
        value = part.get("text", "")
        text += value if isinstance(value, str) else ""
    return text


def normalize_messages(messages: list[Any], caps: TemplateCaps) -> list[Any]:
    """Adapt message content to what the template supports (the C++ `messages_inp_normalizer`).

    String-only templates get typed content arrays joined into one string; typed-only templates get string
    content wrapped as `[{"type": "text", "text": s}]`; otherwise messages are returned unchanged.
    """
    only_string = caps.supports_string_content and not caps.supports_typed_content
    only_typed = caps.supports_typed_content and not caps.supports_string_content
    if not (only_string or only_typed):
        return messages
    out: list[Any] = []
    for message in messages:
        if isinstance(message, dict) and "content" in message:
            content = message["content"]
            if only_typed and isinstance(content, str):
                message = {**message, "content": [{"type": "text", "text": content}]}
            elif only_string and isinstance(content, list):
                message = {**message, "content": _concat_content_parts(content)}
        out.append(message)
    return out
