"""What a model's output may be, as pieces the constrained-decoding exports write in each engine's language
(export/constrained.py: xgrammar structural tags, llguidance Lark): markup, whitespace, JSON under a schema,
free text up to a tag's end, and their sequences, choices and repeats. Here, below the formats, so that a
hand-written format can say how its calls are written (`FormatSpec.call_tags`) where its analysis does not."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Alt", "CallTags", "Json", "Lit", "Many", "Opt", "Pattern", "Piece", "Seq", "Space", "Tag", "Text"]


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
