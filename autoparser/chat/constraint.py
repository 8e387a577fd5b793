"""What a model's output may be, as pieces the constrained-decoding exports write in each engine's language
(export/constrained.py: xgrammar structural tags, llguidance Lark): markup, whitespace, JSON under a schema,
free text up to a tag's end, and their sequences, choices and repeats. Here, below the formats, so that a
hand-written format can say how its calls are written (`FormatSpec.call_tags`) where its analysis does not."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from autoparser.chat.tools import Function, Parameter, parameters

__all__ = ["PYTHON_STRING", "Alt", "CallTags", "Json", "Lit", "Many", "Opt", "Pattern", "Piece", "Seq", "Space", "Tag",
           "Text", "arguments_schema", "by_kind", "json_member", "python_call", "python_calls", "value_schema"]


@dataclass(frozen=True)
class Lit:
    """Markup, as the template writes it."""
    text: str


@dataclass(frozen=True)
class Space:
    """Whitespace, any or none (around markers, where models vary it)."""


@dataclass(frozen=True)
class Json:
    """A JSON value under a schema (a tool's arguments, a typed argument's value)."""
    schema: Any


@dataclass(frozen=True)
class Pattern:
    """Text a regular expression matches (a call's index: `[0-9]+`)."""
    regex: str


@dataclass(frozen=True)
class Text:
    """Any text, up to the end of the tag it is in (a string argument's value)."""


@dataclass(frozen=True)
class Seq:
    items: tuple[Piece, ...]


@dataclass(frozen=True)
class Alt:
    items: tuple[Piece, ...]


@dataclass(frozen=True)
class Opt:
    item: Piece


@dataclass(frozen=True)
class Many:
    """One or more."""
    item: Piece


@dataclass(frozen=True)
class Tag:
    """`begin content end`, the markers literal (a call, an argument, a reasoning block)."""
    begin: str
    content: Piece
    end: str


Piece = Lit | Space | Json | Pattern | Text | Seq | Alt | Opt | Many | Tag


@dataclass(frozen=True)
class CallTags:
    """How a request's calls are written: free text runs until `trigger`, which begins each of `tags` (a call,
    or a section holding the calls); free text may not hold `excludes` (the calls' closers), so that an output
    that lost a call's opener is rejected."""
    trigger: str
    tags: tuple[Tag, ...]
    excludes: tuple[str, ...] = ()
    hand_over: tuple[str, ...] = ()
    """Markup the template writes after the calls, handing the turn over to the tool (`<|tool_response>`)."""
    lead: tuple[str, ...] = ()
    """Markup the template may write before the first call, after the reasoning (harmony's `<|start|>assistant`,
    the role that opens the call's message): where the output is calls, nothing else may stand there."""


def arguments_schema(f: Function) -> Any:
    """The JSON schema a call's arguments are under: the tool's parameters, or any object where it gives none."""
    return f.schema if isinstance(f.schema, Mapping) and f.schema else {"type": "object"}


def value_schema(param: Parameter) -> Any:
    """The JSON schema an argument's value is under (any value where the parameter gives none)."""
    return param.schema if isinstance(param.schema, Mapping) else {}


def json_member(key: str, value: Piece) -> tuple[Piece, ...]:
    """`"KEY": value`, JSON's whitespace free around the colon (a sequence's items, to splice into an object)."""
    return Lit(json.dumps(key)), Space(), Lit(":"), Space(), value


def by_kind(param: Parameter, string: Piece, other: Piece) -> Piece:
    """An argument whose markup says whether its value is a string (DSML's `string="true"`, Kimi K3's
    `type="string"`): `string` where the schema lets the value be a string, `other` where it lets it be anything
    else, either where it lets both."""
    kinds = [*([string] if param.may_be_string else []), *([other] if param.types - {"string"} or not param.types else [])]
    return Alt(tuple(kinds)) if len(kinds) > 1 else kinds[0]


# A Python string literal in either quote, its escapes any backslash and the character after it (a template's
# `tojson` writes the double-quoted one, Python's `repr` the single-quoted one).
PYTHON_STRING = r'"(?:[^"\\]|\\[\s\S])*"|' + r"'(?:[^'\\]|\\[\s\S])*'"
_PYTHON_WORDS = {"boolean": "True|False", "null": "None"}


def _python_value(param: Parameter) -> Piece:
    """A keyword argument's value: a string literal for a string, else the JSON value under the parameter's
    schema (a number, a list, an object, as JSON writes them), or Python's `True`, `False`, `None`."""
    types = param.types
    if types and types <= {"string"}:
        return Pattern(PYTHON_STRING)
    values: list[Piece] = [Json(value_schema(param))]
    words = "|".join(_PYTHON_WORDS[t] for t in sorted(types) if t in _PYTHON_WORDS)
    if words:
        values.append(Pattern(words))
    if "string" in types:
        values.append(Pattern(PYTHON_STRING))
    return Alt(tuple(values)) if len(values) > 1 else values[0]


def python_call(f: Function) -> Piece:
    """`NAME(k=v, k2=v2)`: a call as Python writes it, its keyword arguments the tool's, in any order (which are
    required is not said), the comma between two optional (some templates leave it out)."""
    kwargs = [Seq((Lit(f"{param.name}="), _python_value(param))) for param in parameters(f)]
    if not kwargs:
        return Seq((Lit(f"{f.name}("), Space(), Lit(")")))
    one = Alt(tuple(kwargs))
    listed = Opt(Seq((one, Opt(Many(Seq((Space(), Opt(Lit(",")), Space(), one)))))))
    return Seq((Lit(f"{f.name}("), Space(), listed, Space(), Lit(")")))


def python_calls(fns: Sequence[Function], parallel: bool, start: str, end: str, *, list_wrapped: bool,
                 separator: str) -> CallTags:
    """`python_call`s in a section `start ... end`: a list (`[call, call]`) or one after another, `separator`
    between two (the whitespace around it free); one call only where the request allows one."""
    one = Alt(tuple(python_call(f) for f in fns))
    between = (Lit(separator),) if separator else ()
    more = Opt(Many(Seq((Space(), *between, Space(), one)))) if parallel else Seq(())
    calls = Seq((Lit("["), Space(), one, more, Space(), Lit("]"))) if list_wrapped else Seq((one, more))
    return CallTags(start, (Tag(start, Seq((Space(), calls, Space())), end),), (end,))
