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
from dataclasses import replace

from autoparser.analysis import fixtures as fx
from autoparser.analysis.model import (
    ArgumentsAnalysis,
    CallForm,
    CallSyntax,
    FunctionAnalysis,
    ReasoningAnalysis,
    StringValues,
    ToolFormat,
    ToolsAnalysis,
)
from autoparser.analysis.tools import calls_rendered, json_value_at
from autoparser.peg.nodes import C_SPACE
from autoparser.template.diff import DiffRenderer, trim_whitespace
from autoparser.template.render import common_prefix_len

__all__ = ["arguments_unrendered", "derive_call_form", "opener_before_name", "retag_from_needles",
           "values_misread"]

# A rendered Python call of the first fixture function: its name, `(`, then a keyword argument of the fixture's
# (the template may write the arguments in either order, and either quote style, or none: `city=Paris`).
_PY_CALL = re.compile(rf"{fx.FUN_FIRST}\(\s*(?:{fx.ARG_FIRST}|{fx.ARG_SECOND})\s*=\s*(?P<quote>[\"']?)")
# A string value holding both quotes: how the template writes it tells a Python literal from text printed as it is
_QUOTES_VALUE = "Q\"U'Q"
_NUMBER_VALUE = 73519


def derive_call_form(r: DiffRenderer, reasoning: ReasoningAnalysis, *, cpp_reads_calls: bool = False) \
        -> CallForm | None:
    """The call form of a template whose assistant tool calls render as Python calls, else None. A call whose
    string values stand unquoted (`city=Paris`) counts only where the C++ reading finds no call it can parse
    (`cpp_reads_calls` false): such a call is also a tag reading's `NAME(KEY=VALUE)`."""
    one = calls_rendered(r, fx.first_tool_call())
    if one is None:
        return None
    m = _PY_CALL.search(one)
    if m is None or (cpp_reads_calls and not m.group("quote")):
        return None
    end = _call_end(one, m.start())
    if end is None:
        return None
    before, after = _without_reasoning(one[:m.start()], reasoning), one[end:]
    list_open = before.rstrip(C_SPACE).endswith("[") and after.lstrip(C_SPACE).startswith("]")
    if list_open:
        before = before.rstrip(C_SPACE)[:-1]
        after = after.lstrip(C_SPACE)[1:]
    separator = _separator(r, list_open)
    quote = m.group("quote")
    strings = _string_values(r, quote)
    return CallForm(CallSyntax.PYTHONIC, section_start=trim_whitespace(before),
                    section_end=trim_whitespace(after), list_wrapped=list_open, separator=separator,
                    strings=strings, quote=quote or '"',
                    quoted_values=strings is StringValues.UNESCAPED and _quotes_numbers(r, quote))


def _quotes_numbers(r: DiffRenderer, quote: str) -> bool:
    """Whether a number value is printed between the quotes too (every value formatted as text)."""
    call = fx.tool_call(fx.FUN_FIRST, {fx.ARG_FIRST: fx.VALUE_FIRST, fx.ARG_SECOND: _NUMBER_VALUE})
    rendered = calls_rendered(r, call)
    return rendered is not None and f"{quote}{_NUMBER_VALUE}{quote}" in rendered


def _string_values(r: DiffRenderer, quote: str) -> StringValues:
    """How a string value is written: unquoted, or quoted and escaped as a Python literal, or quoted but printed
    as it is (`'"' + value + '"'`), told by a value holding both quotes."""
    if not quote:
        return StringValues.BARE
    call = fx.tool_call(fx.FUN_FIRST, {fx.ARG_FIRST: _QUOTES_VALUE, fx.ARG_SECOND: fx.VALUE_SECOND})
    rendered = calls_rendered(r, call)
    if rendered is not None and quote + _QUOTES_VALUE + quote in rendered:
        return StringValues.UNESCAPED
    return StringValues.LITERAL


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
    return between if between.strip(C_SPACE) in ("", ",") else default


def retag_from_needles(r: DiffRenderer, tools: ToolsAnalysis, reasoning: ReasoningAnalysis) -> ToolsAnalysis | None:
    """A tagged format read again where the C++'s tag reading leaves the analysis' own names in its markers
    (`{AA_ARG_FST_AA:` as the name's suffix) or takes the call's end into a value's (`values_misread`): from one
    call with two arguments, the text before the name, between the name and the first argument's name, between a
    name and its value, between the two arguments (an argument's opener where the first one has it too:
    `<parameter=`), and after the last value, split where the two-call rendering shows where a call ends. None
    where the rendering is not
    `OPENER NAME suffix KEY sep VALUE ... close` with calls one after another, or where the split leaves a marker
    empty that the parser needs (the opener, a value's end, a call's end)."""
    one = calls_rendered(r, fx.first_tool_call())
    two = calls_rendered(r, fx.first_tool_call(), fx.second_tool_call())
    if one is None or two is None:
        return None
    at = _needles(one, (fx.FUN_FIRST, fx.ARG_FIRST, fx.VALUE_FIRST, fx.ARG_SECOND, fx.VALUE_SECOND))
    if at is None:
        return None
    fun, a1, v1, a2, v2 = at
    v1_end, v2_end = v1 + len(fx.VALUE_FIRST), v2 + len(fx.VALUE_SECOND)
    opener = _without_reasoning(one[:fun], reasoning)
    name_suffix = one[fun + len(fx.FUN_FIRST):a1]
    key_suffix = one[a1 + len(fx.ARG_FIRST):v1]
    between = one[v1_end:a2]  # a value's end + the separator (the next key has no opener of its own here)
    tail = one[v2_end:]
    if one[a2 + len(fx.ARG_SECOND):v2] != key_suffix:
        return None
    value_suffix = between[:common_prefix_len(between, tail)]
    if value_suffix.rfind("<") > value_suffix.rfind(">"):
        # (`</param><` of `</param><param ...` and `</param></function>`: the next tag's `<` is not the value's)
        value_suffix = value_suffix[:value_suffix.rfind("<")]
    separator = between[len(value_suffix):]
    # the first call's close: up to where the second call opens
    second = two.find(opener + fx.FUN_SECOND, len(one) - len(tail))
    if second < 0:
        return None
    close = two[v2_end + len(value_suffix):second]
    if not tail.startswith(value_suffix + close):
        close = close.rstrip(C_SPACE)  # (whitespace the template writes between two calls only)
    # What follows the last call and no other (FunctionGemma's `<start_function_response>`, where the model
    # hands over to the tool) ends the calls; a call itself ends where the next begins.
    after = tail[len(value_suffix + close):]
    if not tail.startswith(value_suffix + close) or not two.endswith(close + after) \
            or not value_suffix.strip(C_SPACE) or not close.strip(C_SPACE) or not opener.strip(C_SPACE):
        return None
    key_prefix = ""
    if separator.strip(C_SPACE) and name_suffix.endswith(separator):
        # Every argument opens with what stands between two of them (`\n  <parameter=`), the first one too: the
        # name's suffix ends before it. The whitespace around that opener is left to the parser's `space`
        # (which would take it before a literal could): `>`, `<parameter=`, `</parameter>`.
        name_suffix = name_suffix[:-len(separator)].rstrip(C_SPACE)
        key_prefix, separator = separator.strip(C_SPACE), ""
        value_suffix = value_suffix.rstrip(C_SPACE)
    # every call opens with the text before its name: the marker that wakes the grammar and wraps each call
    return ToolsAnalysis(
        format=replace(tools.format, section_start="", section_end=after.strip(C_SPACE), per_call_start=opener,
                       per_call_end=""),
        function=FunctionAnalysis(name_suffix=name_suffix, close=close),
        arguments=ArgumentsAnalysis(name_prefix=key_prefix, name_suffix=key_suffix, value_suffix=value_suffix,
                                    separator=separator),
        call_id=tools.call_id)


def values_misread(r: DiffRenderer, tools: ToolsAnalysis) -> bool:
    """Whether the C++'s tag reading took the call's end into a value's end: what the template writes after the
    last value (`</parameter>\n</function>`) begins the value end it reads (`</parameter>\n</function><|im_end|>\n`),
    and that value end does not follow the first value (`...XXXX</parameter>\n  <parameter=...`). No parser made
    from those markers reads the template's calls; they are read again from where the needles sit
    (`retag_from_needles`)."""
    suffix = tools.arguments.value_suffix
    if tools.format.mode is not ToolFormat.TAG_WITH_TAGGED or tools.function.close or not suffix.strip(C_SPACE):
        return False
    one = calls_rendered(r, fx.first_tool_call())
    at = _needles(one or "", (fx.VALUE_FIRST, fx.VALUE_SECOND))
    if one is None or at is None:
        return False
    after_first, after_last = one[at[0] + len(fx.VALUE_FIRST):], one[at[1] + len(fx.VALUE_SECOND):]
    return not after_first.startswith(suffix) and len(suffix) > len(after_last) and suffix.startswith(after_last)


def arguments_unrendered(r: DiffRenderer, tools: ToolsAnalysis) -> bool:
    """Whether the template writes a call with no trace of its arguments where the C++ passes them as an object:
    a template that prints `tool_call.function.arguments` as it comes (llama-cpp-python's function-calling
    template, `functions.NAME:\n{{ arguments }}`) prints the object as nothing in llama.cpp's jinja, so the C++
    reads tagged arguments with no markers, and no parser made from them reads a call. The arguments as requests
    give them, JSON text, show the form (`opener_before_name`)."""
    if tools.format.mode is ToolFormat.NONE:
        return False
    one = calls_rendered(r, fx.first_tool_call())
    return one is not None and fx.FUN_FIRST in one and not any(
        needle in one for needle in (fx.ARG_FIRST, fx.ARG_SECOND, fx.VALUE_FIRST, fx.VALUE_SECOND))


def opener_before_name(r: DiffRenderer, tools: ToolsAnalysis, reasoning: ReasoningAnalysis) -> ToolsAnalysis | None:
    """JSON arguments after a name (`TAG_WITH_JSON`) that nothing marks but the text each call writes before its
    name, which the C++ does not take for a marker (`functions.` of `functions.NAME:\n{json}`, calls one after
    another): the tools with that text as each call's opener (the marker that wakes the grammar, and where content
    ends), read from one call and from the second of two, where both write it. None where the record has an opener
    already, the calls write no common text before their names, or the first JSON object after the name is not the
    arguments."""
    fmt, fn = tools.format, tools.function
    if fmt.mode is not ToolFormat.TAG_WITH_JSON or (fmt.section_start + fmt.per_call_start + fn.name_prefix).strip(
            C_SPACE):
        return None
    one = calls_rendered(r, fx.first_tool_call())
    two = calls_rendered(r, fx.first_tool_call(), fx.second_tool_call())
    if one is None or two is None or fx.FUN_FIRST not in one or fx.FUN_SECOND not in two:
        return None
    at = one.index(fx.FUN_FIRST)
    name_end = at + len(fx.FUN_FIRST)
    opener = _without_reasoning(one[:at], reasoning).lstrip(C_SPACE)
    arguments = _json_arguments_after(one, name_end)
    if not opener.strip(C_SPACE) or not two[:two.index(fx.FUN_SECOND)].endswith(opener) or arguments is None:
        return None
    # (the name's suffix: what stands between the name and the JSON, which the C++ may not have taken whole)
    return replace(tools, format=replace(fmt, per_call_start=opener),
                   function=replace(fn, name_prefix="", name_suffix=one[name_end:arguments]))


def _json_arguments_after(text: str, at: int) -> int | None:
    """Where the call's arguments, the first JSON object after `at`, begin; None where that object is not them."""
    start = text.find("{", at)
    found = json_value_at(text, start) if start >= 0 else None
    return start if found is not None and isinstance(found[0], dict) and fx.ARG_FIRST in found[0] else None


def _needles(text: str, needles: tuple[str, ...]) -> list[int] | None:
    """Where each needle first occurs after the one before, or None."""
    found, at = [], 0
    for needle in needles:
        i = text.find(needle, at)
        if i < 0:
            return None
        found.append(i)
        at = i + len(needle)
    return found
