"""Phase 4 (beyond llama.cpp): tool-call forms the C++ analyzer cannot describe, derived the same way.

The C++ reads a rendered call as JSON (`{"name": ...}`) or as tags around the function and argument names.
A template that renders Python calls, `get_weather(city="Paris")` in a `[...]` list or between markers, falls
into neither: the C++ records a tagged format whose "markers" hold the needles themselves and parses nothing.
Here the same rendering the tool phase diffs (an assistant message with one call, then with two) is read as
Python call syntax; where it is, the analysis records a `CallForm` beside the C++ record (which stays as the
C++ would write it) and the generator builds the parser from that instead.
"""

from __future__ import annotations

import re

from autoparser.analysis import fixtures as fx
from autoparser.analysis.model import CallForm, CallSyntax, ReasoningAnalysis
from autoparser.analysis.tools import calls_rendered
from autoparser.template.diff import DiffRenderer, trim_whitespace

__all__ = ["derive_call_form"]

_WS = " \t\n\v\f\r"
# A rendered Python call of the first fixture function: its name, `(`, then a keyword argument of the fixture's
# (the template may write the arguments in either order, and either quote style).
_PY_CALL = re.compile(rf"{fx.FUN_FIRST}\(\s*(?:{fx.ARG_FIRST}|{fx.ARG_SECOND})\s*=\s*[\"']")


def derive_call_form(r: DiffRenderer, reasoning: ReasoningAnalysis) -> CallForm | None:
    """The call form of a template whose assistant tool calls render as Python calls, else None."""
    one = calls_rendered(r, fx.first_tool_call())
    if one is None:
        return None
    m = _PY_CALL.search(one)
    if m is None:
        return None
    end = _call_end(one, m.start())
    if end is None:
        return None
    before, after = _without_reasoning(one[:m.start()], reasoning), one[end:]
    list_open = before.rstrip(_WS).endswith("[") and after.lstrip(_WS).startswith("]")
    if list_open:
        before = before.rstrip(_WS)[:-1]
        after = after.lstrip(_WS)[1:]
    separator = _separator(r, list_open)
    return CallForm(CallSyntax.PYTHONIC, section_start=trim_whitespace(before),
                    section_end=trim_whitespace(after), list_wrapped=list_open, separator=separator)


def _call_end(text: str, start: int) -> int | None:
    """Where the Python call starting at `start` ends (after its `)`), skipping quoted strings."""
    depth, i, quote = 0, start, ""
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


def _without_reasoning(before: str, reasoning: ReasoningAnalysis) -> str:
    """The text before the call from the last reasoning marker on (an empty reasoning block some templates
    render before the calls is the reasoning's, not the calls' opener)."""
    for marker in (reasoning.end, reasoning.start):
        m = trim_whitespace(marker)
        if m and m in before:
            return before[before.rindex(m) + len(m):]
    return before


def _separator(r: DiffRenderer, list_wrapped: bool) -> str:
    """What the template writes between two calls: `, ` in a list, else a newline (when it renders two)."""
    two = calls_rendered(r, fx.first_tool_call(), fx.second_tool_call())
    default = ", " if list_wrapped else "\n"
    if two is None:
        return default
    first = _PY_CALL.search(two)
    second = two.find(fx.FUN_SECOND + "(")
    if first is None or second < 0:
        return default
    end = _call_end(two, first.start())
    if end is None or end > second:
        return default
    between = two[end:second]
    return between if between.strip(_WS) in ("", ",") else default
