"""Phase 3: how a template renders tool calls (C++ `analyze_tools`, common/chat-diff-analyzer.cpp).

The C++ steps refine each other's fields; here each step replaces the frozen records it refines
(`dataclasses.replace`), so every intermediate state is a valid analysis record.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import re
from collections.abc import Iterator
from typing import Any

from autoparser.analysis import fixtures as fx
from autoparser.analysis._search import MARKER_START, anchored, anywhere, last_marker_with_tail, parser
from autoparser.analysis.model import (
    ArgumentsAnalysis,
    CallIdAnalysis,
    CallIdPosition,
    FunctionAnalysis,
    NestedCall,
    ReasoningAnalysis,
    ToolFormat,
    ToolFormatAnalysis,
    ToolsAnalysis,
    TypedArgument,
)
from autoparser.errors import AnalysisError
from autoparser.peg.nodes import C_SPACE
from autoparser.template.caps import TemplateCaps
from autoparser.template.diff import (
    CompareResult,
    DiffRenderer,
    TemplateParams,
    calculate_diff_split,
    trim_leading_whitespace,
    trim_whitespace,
    until_common_prefix,
)

__all__ = [
    "analyze_tools",
    "arguments_sorted",
    "call_id_in_name_prefix",
    "call_id_word",
    "call_separator",
    "calls_rendered",
    "instructed_opener",
    "json_value_at",
    "nested_call",
    "section_start_in_prompt",
    "typed_argument",
]

FUN_FIRST, FUN_SECOND, ARG_FIRST, ARG_SECOND = fx.FUN_FIRST, fx.FUN_SECOND, fx.ARG_FIRST, fx.ARG_SECOND


def calls_rendered(r: DiffRenderer, *calls: dict[str, Any]) -> str | None:
    """What an assistant message with `calls` adds to one with plain content (the T1 diff), None if nothing."""
    params = TemplateParams(messages=(fx.user_msg(), fx.assistant()), tools=tuple(fx.tools()))
    cmp = r.compare_variants(params, lambda p: dataclasses.replace(
        p, messages=(fx.user_msg(), fx.assistant_calls(*calls))))
    if cmp is None or not cmp.diff.right:
        return None
    return cmp.diff.right


def call_separator(r: DiffRenderer, tools: ToolsAnalysis) -> str | None:
    """Beyond the C++: what the template writes between two calls in one section that no per-call marker
    wraps (nothing between DSML invokes, whose closer ends the line; a newline between JSON calls written one
    per line), where llama.cpp's grammar puts `, `; None where the template writes `, ` too, the calls have
    per-call markers or a list around them (their own separators), or two calls cannot be told apart."""
    fmt, fn = tools.format, tools.function
    if fmt.per_call_start or fmt.tools_array_wrapped or fmt.fun_name_is_key:
        return None
    text = calls_rendered(r, fx.first_tool_call(), fx.second_tool_call())
    if text is None:
        return None
    first, second = text.find(FUN_FIRST), text.find(FUN_SECOND)
    if not 0 <= first < second:
        return None
    if fmt.mode is ToolFormat.JSON_NATIVE:
        span = _json_call_spans(text, first, second)
        if span is None:
            return None
        end, start = span
    elif fmt.mode is ToolFormat.TAG_WITH_TAGGED and fn.close.strip() and fn.name_prefix.strip():
        end = text.find(fn.close, first)
        start = text.rfind(fn.name_prefix, 0, second)
        if end < 0 or start < 0:
            return None
        end += len(fn.close)
    else:
        return None
    if end > start:
        return None
    between = text[end:start]
    # (JSON calls: whitespace around the comma is the grammar's `space`)
    cpp = between.strip() == "," if fmt.mode is ToolFormat.JSON_NATIVE else between == ", "
    return None if cpp else between


def arguments_sorted(r: DiffRenderer, tools: ToolsAnalysis) -> bool:
    """Beyond the C++: the template writes a call's tagged arguments sorted by name (`| dictsort`: Google's
    FunctionGemma template, `call:search{max_results:3,query:...}`), whatever order the call gives them; read from
    a call whose arguments come in the reverse order of their names."""
    if tools.format.mode is not ToolFormat.TAG_WITH_TAGGED:
        return False
    given = calls_rendered(r, fx.first_tool_call())
    reversed_ = calls_rendered(r, fx.tool_call(FUN_FIRST, {ARG_SECOND: fx.VALUE_SECOND, ARG_FIRST: fx.VALUE_FIRST}))

    def first_before_second(text: str | None) -> bool:
        return text is not None and 0 <= text.find(ARG_FIRST) < text.find(ARG_SECOND)

    return first_before_second(given) and first_before_second(reversed_)


def typed_argument(r: DiffRenderer, tools: ToolsAnalysis) -> TypedArgument | None:
    """Beyond the C++: how the template writes a tagged argument whose value is a number, read from a render of
    one, where that differs from the string value the C++ reads its markers from (`TypedArgument`). None where the
    template writes both alike, or the value is not followed by the string's closer or by what ends an argument."""
    args, fn = tools.arguments, tools.function
    if tools.format.mode is not ToolFormat.TAG_WITH_TAGGED:
        return None
    number = "1234567"  # (a value no marker of the template holds)
    text = calls_rendered(r, fx.tool_call(FUN_FIRST, {ARG_FIRST: int(number)}))
    at = -1 if text is None else text.find(ARG_FIRST)
    end = -1 if text is None or at < 0 else text.find(number, at)
    if text is None or end < 0:
        return None
    opener, rest = text[at + len(ARG_FIRST):end], text[end + len(number):]
    if opener == args.name_suffix + args.value_prefix:
        return None
    closer = trim_whitespace(args.value_suffix)
    if closer and rest.startswith(closer):
        return TypedArgument(opener, args.value_suffix)
    ends = [m for m in map(trim_whitespace, (args.separator, fn.close, args.end)) if m]
    if not any(rest.startswith(m) for m in ends):
        return None
    # (the string's closer is not written: a quote, where the string's opener is this one and it)
    quote = closer if closer and args.name_suffix + args.value_prefix == opener + closer else ""
    return TypedArgument(opener, "", quote)


def call_id_in_name_prefix(tools: ToolsAnalysis) -> tuple[str, str] | None:
    """Beyond the C++: (what the function name prefix has before the call's id, after it), where the C++ found no
    id and its name prefix holds the first call's (`call00001<|tool_call:name|>`: the diff it finds ids with
    begins before the tools the system prompt lists, which name the function too)."""
    before, found, after = tools.function.name_prefix.partition(fx.CALL_ID_001)
    if tools.call_id.pos is not CallIdPosition.NONE or not found or not after.strip():
        return None
    return before, after


def instructed_opener(r: DiffRenderer, tools: ToolsAnalysis) -> tuple[str, str] | None:
    """Beyond the C++: (the call opener as the template's calls render it, as its tool instructions spell it),
    where the two differ. A template's instructions show the model the call it is to write, and the model writes
    what it was trained on, which the instructions and the vocabulary spell: Step3's instructions teach
    `<｜tool_calls_begin｜>\n<｜tool_call_begin｜>\nfunction<｜tool_sep｜><steptml:invoke name="...`, its history
    renders the opener `<｜tool_call_begin>｜>` (sic). Found as the text the prompt with tools holds between the
    section's opener, where there is one, and the rest of the call's head as rendered (the name's prefix), where
    that text is not the rendered opener but close to it (most of its characters, in order): a text the prompt
    holds there by chance is not. The relaxed parser reads both spellings (None: the instructions show the
    rendered one, or no call)."""
    fmt, fn = tools.format, tools.function
    opener, rest = trim_whitespace(fmt.per_call_start), fn.name_prefix
    lead = trim_whitespace(fmt.section_start)
    if fmt.mode is ToolFormat.NONE or not opener or len(trim_whitespace(rest)) < 3:
        return None
    prompt = r.apply(TemplateParams(messages=(fx.user_msg(),), tools=tuple(fx.tools())))
    if prompt is None or fmt.per_call_start + rest in prompt:
        return None
    # (the spelling: between the section's opener and the rest, or the word right before the rest)
    between = re.escape(lead) + rf"[ \t\r\n]*(\S[^\n]{{0,{2 * len(opener)}}}?)" if lead else r"(\S+?)"
    for found in re.finditer(between + re.escape(rest), prompt):
        spelled = trim_whitespace(found[1])
        if spelled != opener and difflib.SequenceMatcher(None, spelled, opener).ratio() >= 0.8:
            return opener, spelled
    return None


def call_id_word(name_marker: str) -> str:
    """The character class of a call id the model makes up before the name's marker (`call_id_in_name_prefix`): a
    word up to the marker's first character, no whitespace, so it never runs over a marker."""
    # (escapes, not the characters: a class holding a raw newline is no regular expression a consumer takes)
    return rf"[^{re.escape(name_marker.strip(C_SPACE)[:1])} \t\r\n]"


def nested_call(r: DiffRenderer, tools: ToolsAnalysis) -> NestedCall | None:
    """Beyond the C++: the member of a JSON call object that holds both the function's name and its arguments,
    where the C++ takes it for the arguments (`args_field`): OpenAI's own call object, which a template writes
    with `tool_calls | tojson` (`{"id": ..., "type": "function", "function": {"name": ..., "arguments": ...}}`).
    With it, the members the call writes before it other than its id (`"type": "function"`). None where the
    record reads the object (the name is a member of its own, or the record nests it already)."""
    fmt = tools.format
    if fmt.mode is not ToolFormat.JSON_NATIVE or fmt.fun_name_is_key or "." in fmt.name_field + fmt.args_field:
        return None
    text = calls_rendered(r, fx.first_tool_call())
    call = None if text is None else _outermost_object(text, text.find(FUN_FIRST))
    member = None if call is None else call.get(fmt.args_field)
    if call is None or not isinstance(member, dict):
        return None
    name_key = next((k for k, v in member.items() if v == FUN_FIRST), None)
    args_key = next((k for k, v in member.items()
                     if k != name_key and ARG_FIRST in json.dumps(v, ensure_ascii=False)), None)
    if name_key is None or args_key is None:
        return None
    before = list(call)[:list(call).index(fmt.args_field)]
    constants = tuple((k, json.dumps(call[k], ensure_ascii=False)) for k in before
                      if k not in (fmt.id_field, fmt.gen_id_field) and isinstance(call[k], (str, int, float, bool)))
    return NestedCall(fmt.args_field, name_key, args_key, constants)


def _outermost_object(text: str, at: int) -> dict[str, Any] | None:
    """The outermost JSON object of `text` that holds the position `at` (None if none, or `at` < 0)."""
    found = None
    for value, end in _values_opening_before(text, at):
        if end > at and isinstance(value, dict):
            found = value
    return found


def _values_opening_before(text: str, at: int) -> Iterator[tuple[Any, int]]:
    """The JSON values that open with a `{` at or before `at`, the nearest first: each value and where it ends."""
    for start in range(at, -1, -1):
        if text[start] == "{" and (found := json_value_at(text, start)) is not None:
            yield found


def json_value_at(text: str, at: int) -> tuple[Any, int] | None:
    """The JSON value that begins at `at`, and where it ends; None where none does."""
    try:
        return _DECODER.raw_decode(text, at)
    except json.JSONDecodeError:
        return None


_DECODER = json.JSONDecoder()


def section_start_in_prompt(r: DiffRenderer, tools: ToolsAnalysis) -> bool:
    """Beyond the C++: the generation prompt ends with the call section's opener, so the model writes its calls
    after it, without one. A template that opens each assistant message with its turn header but writes the
    header of a message with calls otherwise (vLLM's Llama 4 JSON template: a newline before it) gives that
    header as the opener the diff finds; the prompt has written it already. Only where that opener is all that
    marks the calls (no per-call marker, no section end): a section the model closes, or calls each marked,
    are read from their own markers already."""
    fmt = tools.format
    start = trim_whitespace(fmt.section_start)
    if not start or trim_whitespace(fmt.section_end) or trim_whitespace(fmt.per_call_start):
        return False
    base = TemplateParams(messages=(fx.user_msg(),), tools=tuple(fx.tools()))
    history = r.apply(base)
    prompted = r.apply(dataclasses.replace(base, add_generation_prompt=True))
    if history is None or prompted is None or not prompted.startswith(history):
        return False
    return trim_whitespace(prompted[len(history):]).endswith(start)


def _json_call_spans(text: str, first: int, second: int) -> tuple[int, int] | None:
    """(where the JSON object of the call named at `first` ends, where the one named at `second` begins): each
    the outermost object around its name that does not reach the other's."""
    end = None
    for _, stop in _values_opening_before(text, first):
        if first < stop <= second:
            end = stop  # (keep going out: the outermost one that stops before the second call)
    if end is None:
        return None
    start = next((i for i in range(end, second) if text[i] == "{" and (json_value_at(text, i) or (None, 0))[1] > second),
                 None)
    return None if start is None else (end, start)


class _ToolAnalyzer:
    def __init__(self, r: DiffRenderer) -> None:
        self.r = r
        self.format = ToolFormatAnalysis()
        self.function = FunctionAnalysis()
        self.arguments = ArgumentsAnalysis()
        self.call_id = CallIdAnalysis()

    def result(self) -> ToolsAnalysis:
        return ToolsAnalysis(self.format, self.function, self.arguments, self.call_id)

    def set_format(self, **changes: Any) -> None:
        self.format = dataclasses.replace(self.format, **changes)

    def set_function(self, **changes: Any) -> None:
        self.function = dataclasses.replace(self.function, **changes)

    def set_arguments(self, **changes: Any) -> None:
        self.arguments = dataclasses.replace(self.arguments, **changes)

    def set_call_id(self, **changes: Any) -> None:
        self.call_id = dataclasses.replace(self.call_id, **changes)

    def per_call_from_section(self) -> None:
        """What looked like a section's markers are each call's."""
        f = self.format
        self.set_format(per_call_start=f.section_start, per_call_end=f.section_end, section_start="", section_end="")

    def compare_calls(self, a: list[dict[str, Any]], b: list[dict[str, Any]]) -> CompareResult | None:
        params = TemplateParams(messages=(fx.user_msg(), fx.assistant_calls(*a)), tools=tuple(fx.tools()))
        return self.r.compare_variants(params, lambda p: dataclasses.replace(
            p, messages=(fx.user_msg(), fx.assistant_calls(*b))))

    # --- T1 ---------------------------------------------------------------------------------------------------

    def analyze_tool_calls(self, reasoning: ReasoningAnalysis, parallel: bool) -> None:
        haystack = calls_rendered(self.r, fx.first_tool_call())
        if haystack is not None:
            self.analyze_tool_call_format(haystack, reasoning, parallel)

    def analyze_tool_call_format(self, haystack: str, reasoning: ReasoningAnalysis, parallel: bool) -> None:
        def in_json(needle: str) -> bool:
            p = parser("t.injson:" + needle, lambda b: b.choice([b.literal("{"), b.literal(":")])
                       << b.tag("dq", b.literal('"') + b.literal(needle) + b.literal('"')))
            return anywhere(p, haystack, starts="{:").success

        if in_json(FUN_FIRST):
            self.set_format(mode=ToolFormat.JSON_NATIVE)
        elif in_json(ARG_FIRST):
            self.set_format(mode=ToolFormat.TAG_WITH_JSON)
        else:
            self.set_format(mode=ToolFormat.TAG_WITH_TAGGED)

        clean = haystack
        if reasoning.start:
            pos = haystack.find(reasoning.start)
            if pos >= 0:
                clean = haystack[:pos] + haystack[pos + len(reasoning.start):]
        if reasoning.end:
            pos = clean.find(reasoning.end)
            if pos >= 0:
                clean = clean[:pos] + clean[pos + len(reasoning.end):]

        if self.format.mode is ToolFormat.JSON_NATIVE:
            self.analyze_json_native(clean)
            if parallel:
                self.analyze_json_native_parallel_calls()
        else:
            self.analyze_non_json(clean)
        self.set_format(section_end=trim_whitespace(self.format.section_end),
                        per_call_end=trim_whitespace(self.format.per_call_end))

    def analyze_json_native(self, clean: str) -> None:
        json_start = clean.find("{")
        json_end = clean.rfind("}")
        if json_start < 0 or json_end < 0:
            # The C++ substr with npos throws here; its autoparser gives up on the template.
            raise AnalysisError("tool call JSON not found in the rendered tool call")
        cut = clean[json_start:json_end + 1]
        try:
            call_struct = json.loads(cut)
        except (ValueError, RecursionError) as err:
            raise AnalysisError(f"rendered tool call is not valid JSON: {err}") from None
        if not isinstance(call_struct, dict):
            raise AnalysisError("rendered tool call is not a JSON object")

        def dump(v: Any) -> str:
            return json.dumps(v, ensure_ascii=False, separators=(",", ":"))

        def register(prefix: str, key: str, value: Any) -> None:
            name = f"{prefix}.{key}" if prefix else key
            if isinstance(value, str) and "call0000" in value:
                self.set_format(id_field=name)
            elif isinstance(value, str) and value == FUN_FIRST:
                self.set_format(name_field=name)
            elif ARG_FIRST in dump(value):
                self.set_format(args_field=name)
            elif "id" in key:
                self.set_format(gen_id_field=name)

        for key, value in call_struct.items():
            if key == FUN_FIRST:
                self.set_format(fun_name_is_key=True, name_field="", args_field="")
            else:
                if isinstance(value, dict) and ARG_FIRST not in dump(value):
                    self.set_format(function_field=key)
                    for sk, sv in value.items():
                        register(key, sk, sv)
                register("", key, value)

        ap = parser("t.array:" + cut, lambda b: b.tag("pre", b.literal("[") + b.space()) + b.literal(cut)
                    + b.tag("post", b.space() + b.literal("]")))
        res = anywhere(ap, clean, literal="[")
        if res.success:
            self.set_format(tools_array_wrapped=True)
            json_start -= len(res.get("pre"))
            json_end += len(res.get("post"))
        json_end += 1

        f = self.format
        located: list[tuple[int, str]] = []
        for fieldname in (f.name_field, f.args_field, f.id_field, f.gen_id_field):
            if fieldname:
                pos = clean.find(fieldname)
                # npos sorts after every real position
                located.append((pos if pos >= 0 else 1 << 62, fieldname))
        located.sort()
        section_end = trim_whitespace(clean[json_end:])
        self.set_format(parameter_order=tuple(name for _, name in located),
                        section_start=trim_leading_whitespace(clean[:max(json_start, 0)]),
                        section_end="" if f.tools_array_wrapped and section_end == "]" else section_end)

    def analyze_json_native_parallel_calls(self) -> None:
        cmp = self.compare_calls([fx.first_tool_call()], [fx.first_tool_call(), fx.second_tool_call()])
        if cmp is None:
            return
        if self.format.section_start and self.format.section_start in cmp.diff.right:
            self.per_call_from_section()

    def analyze_non_json(self, clean: str) -> None:
        fun = FUN_FIRST
        fun_marker_p = parser("t.funmarker", lambda p: p.tag("fun_marker", p.choice([
            p.tag("fun_pre", p.literal("<") + p.until_one_of([">", fun])) + p.literal(fun)
            + p.tag("fun_post", p.negate(p.space() + p.literal("<")) + p.until(">") + p.literal(">")) + p.space(),
            p.tag("fun_pre", p.literal("[") + p.until_one_of(["]", fun])) + p.literal(fun)
            + p.tag("fun_post", p.negate(p.space() + p.literal("[") + p.until("]") + p.literal("]")) + p.space()),
        ])))
        fun_res = anywhere(fun_marker_p, clean, starts=MARKER_START)
        fun_marker = fun_res.get("fun_marker") if fun_res.success else fun

        per_tool = parser("t.pertool:" + fun_marker, lambda p: p.tag("sec_start", p.marker() + p.space())
                          + p.tag("call_start", p.marker() + p.space()) + p.tag("fun_pre", p.until(fun_marker))
                          + p.literal(fun_marker) + p.tag("rest", p.rest()))
        result = anywhere(per_tool, clean, starts=MARKER_START)
        if result.success:
            closers = parser("t.double_closer", lambda p: p.tag("call_end", p.marker() + p.space())
                             + p.tag("sec_end", p.marker() + p.space()) + p.end())
            result_end = anywhere(closers, result.get("rest"), starts=MARKER_START)
            self.set_function(name_prefix=fun_res.get("fun_pre") + self.function.name_prefix)
        else:
            section = parser("t.section:" + fun_marker, lambda p: p.tag("sec_start", p.marker() + p.space())
                             + p.literal(fun_marker) + p.tag("rest", p.rest()))
            result = anywhere(section, clean, starts=MARKER_START)
            closer = parser("t.single_closer", lambda p: p.tag("sec_end", p.marker() + p.space()) + p.end())
            result_end = anywhere(closer, result.get("rest"), starts=MARKER_START)
        self.set_format(per_call_start=result.get("call_start"), per_call_end=result_end.get("call_end"),
                        section_start=result.get("sec_start"), section_end=result_end.get("sec_end"))

    # --- T2 ---------------------------------------------------------------------------------------------------

    def check_per_call_markers(self) -> None:
        cmp = self.compare_calls([fx.first_tool_call()], [fx.first_tool_call(), fx.second_tool_call()])
        if cmp is None:
            return
        common = calculate_diff_split(cmp.diff.suffix, cmp.diff.right)
        second = trim_leading_whitespace(common.right)
        if self.format.section_start and second.startswith(self.format.section_start):
            self.per_call_from_section()
        end = self.format.per_call_end
        if end:
            one, two = _count(cmp.output_A, end), _count(cmp.output_B, end)
            if one > 0 and one == two:
                # the end marker closes the whole section, whatever the number of calls
                self.set_format(section_end=end, per_call_end="")

    # --- T3 ---------------------------------------------------------------------------------------------------

    def extract_function_markers(self) -> None:
        params = TemplateParams(messages=(fx.user_msg(), fx.assistant_calls(fx.first_tool_call())),
                                tools=tuple(fx.tools()))
        cmp = self.r.compare_variants(params, lambda p: dataclasses.replace(
            p, messages=(fx.user_msg(), fx.assistant_calls(fx.second_tool_call()))))
        if cmp is None:
            return
        diff = cmp.diff
        if FUN_FIRST not in diff.left or FUN_SECOND not in diff.right:
            return
        f = self.format
        prefix_marker = f.per_call_start or f.section_start
        if prefix_marker and prefix_marker in diff.prefix:
            self.set_function(name_prefix=diff.prefix[diff.prefix.rfind(prefix_marker) + len(prefix_marker):])

        name_p = parser("t.name", lambda p: p.tag("pre", p.until(FUN_FIRST)) + p.literal(FUN_FIRST)
                        + p.tag("post", p.zero_or_more(p.negate(p.marker()) + p.any())))
        res = anchored(name_p, diff.left)
        if res.success:
            self.set_function(name_prefix=self.function.name_prefix + res.get("pre"), name_suffix=res.get("post"))

        if f.mode is ToolFormat.TAG_WITH_JSON:
            def json_ext(p: Any) -> Any:
                non_json = p.marker() | (p.negate(p.literal("{")) + p.negate(p.literal("[")) + p.any())
                after_json = p.zero_or_more(p.negate(p.marker()) + p.any()) + p.marker()
                return p.tag("ext", p.zero_or_more(non_json)) + after_json
            res = anchored(parser("t.json_ext", json_ext), diff.suffix)
            if res.success:
                self.set_function(name_suffix=self.function.name_suffix + res.get("ext"))
        else:
            res = anchored(parser("t.tag_ext", lambda p: p.tag("ext", p.zero_or_more(p.negate(p.marker()) + p.any()))),
                           diff.suffix)
            if res.success:
                ext = res.get("ext")
                self.set_function(name_suffix=self.function.name_suffix + ext)

                def sep(p: Any) -> Any:
                    def arg_start() -> Any:
                        return p.marker() + p.space() + p.choice([p.literal(ARG_FIRST), p.literal(ARG_SECOND)])
                    return p.tag("sep", p.zero_or_more(p.negate(arg_start()) + p.any())) + arg_start()
                sres = anchored(parser("t.sep", sep), diff.suffix[len(ext):])
                if sres.success:
                    self.set_function(args_separator=trim_whitespace(sres.get("sep")))

        suffix_marker = f.per_call_end or f.section_end
        closer = ""
        if not suffix_marker:
            nocall = self.r.compare_variants(params, lambda p: dataclasses.replace(
                p, messages=(fx.user_msg(), fx.assistant())))
            if nocall is not None:
                left = nocall.diff.left
                pos = left.find("YYYY")
                # The C++ adds 4 to npos, which wraps around to 3.
                closer = left[pos + 4:] if pos >= 0 else left[3:]
        else:
            pos = diff.suffix.find(suffix_marker)
            closer = diff.suffix[:pos] if pos >= 0 else diff.suffix
        if closer:
            if f.mode is ToolFormat.TAG_WITH_TAGGED:
                cp = parser("t.close_tagged", lambda p: p.until("YYYY") + p.literal("YYYY") + p.space()
                            + p.marker() + p.space() + p.tag("close", p.rest()))
                res = anchored(cp, closer)
                if res.success:
                    self.set_function(close=res.get("close"))
            elif f.mode is ToolFormat.TAG_WITH_JSON:
                cp = parser("t.close_json", lambda p: p.until("YYYY") + p.literal("YYYY")
                            + p.tag("post_val", p.rest()))
                res = anchored(cp, closer)
                if res.success:
                    post = res.get("post_val")
                    pos = max(post.rfind("}"), post.rfind("]"))
                    if 0 <= pos < len(post) - 1:
                        self.set_function(close=trim_leading_whitespace(post[pos + 1:]))
        self.set_function(close=trim_leading_whitespace(self.function.close))

    # --- T4 / A1, A2 ------------------------------------------------------------------------------------------

    def extract_argument_name_markers(self) -> None:
        cmp = self.compare_calls([fx.first_tool_call_one_arg()], [fx.first_tool_call_other_arg()])
        if cmp is None:
            return
        diff = cmp.diff
        if not diff.left or not diff.right:
            return
        lp = parser("a.left", lambda p: p.tag("pre", p.until(ARG_FIRST)) + p.literal(ARG_FIRST)
                    + p.tag("suffix", p.until_one_of(['"', "X"])))
        rp = parser("a.right", lambda p: p.tag("pre", p.until(ARG_SECOND)) + p.literal(ARG_SECOND)
                    + p.tag("suffix", p.until_one_of(['"', "Y"])))
        lres, rres = anywhere(lp, diff.left), anywhere(rp, diff.right)
        if (lres.success and rres.success and lres.get("pre") and lres.get("pre") == rres.get("pre")
                and lres.get("suffix") == rres.get("suffix")):
            self.set_arguments(name_prefix=lres.get("pre"), name_suffix=lres.get("suffix"))
        elif diff.left.startswith(ARG_FIRST) and diff.right.startswith(ARG_SECOND):
            pres = anchored(_LAST_MARKER_TAIL("name_prefix"), diff.prefix)
            self.set_arguments(name_prefix=pres.get("name_prefix") if pres.success else diff.prefix)
            after_first = diff.left[len(ARG_FIRST):] + diff.suffix
            sp = parser("a.name_suffix", lambda p: p.tag("suffix", p.zero_or_more(p.negate(p.marker()) + p.any())
                                                         + p.marker() + p.space()))
            sres = anywhere(sp, after_first)
            if sres.success:
                self.set_arguments(name_suffix=sres.get("suffix"))

    def extract_argument_value_markers(self) -> None:
        cmp = self.compare_calls([fx.first_tool_call_one_arg()], [fx.first_tool_call_one_arg_other_val()])
        if cmp is None:
            return
        diff = cmp.diff
        if diff.left != "XXXX" or diff.right != "YYYY":
            return
        f, fn = self.format, self.function
        ending = ARG_FIRST + self.arguments.name_suffix
        prefix = diff.prefix
        if ending in prefix:
            prefix = prefix[prefix.rfind(ending) + len(ending):]
        if prefix:
            pres = anchored(_LAST_MARKER_TAIL("val_prefix"), prefix)
            self.set_arguments(value_prefix=pres.get("val_prefix") if pres.success else prefix)
        value_suffix = diff.suffix
        if fn.close:
            pos = value_suffix.find(fn.close)
            if pos >= 0:
                value_suffix = value_suffix[:pos]
        elif f.per_call_end or f.section_end:
            end_marker = f.per_call_end or f.section_end
            pos = value_suffix.find(end_marker)
            if pos >= 0:
                value_suffix = value_suffix[:pos]
        if trim_whitespace(value_suffix):
            self.set_arguments(value_suffix=value_suffix)

    # --- T5, T7 -----------------------------------------------------------------------------------------------

    def extract_argument_separator(self) -> None:
        cmp = self.compare_calls([fx.first_tool_call_one_arg()], [fx.first_tool_call()])
        if cmp is None:
            return
        if cmp.diff.right:
            self.set_arguments(separator=until_common_prefix(cmp.diff.right, ARG_FIRST, ARG_SECOND))

    def extract_call_id_markers(self) -> None:
        cmp = self.compare_calls([fx.first_tool_call()], [fx.first_tool_call_alt_id()])
        if cmp is None:
            return
        diff = cmp.diff
        if not diff.left and not diff.right:
            return
        common = "call"
        fpre = diff.prefix.rfind(FUN_FIRST)
        fsuf = diff.suffix.find(FUN_FIRST)
        if fpre >= 0 and fsuf < 0:
            apre = diff.prefix.find("{", fpre)
            asuf = diff.suffix.find("{")
            if asuf >= 0 and apre < 0:
                self.set_call_id(pos=CallIdPosition.BETWEEN_FUNC_AND_ARGS)
                after_func = diff.prefix[fpre + len(FUN_FIRST):]
                ip = parser("id.prefix", lambda p: p.tag("prefix", p.marker())
                            + p.zero_or_more(p.negate(p.marker()) + p.negate(p.literal(common)) + p.any())
                            + p.literal(common))
                res = anywhere(ip, after_func, starts=MARKER_START)
                self.set_call_id(prefix=res.get("prefix") if res.success else _find_last_marker(after_func))
                sp = parser("id.suffix", lambda p: p.zero_or_more(p.negate(p.marker()) + p.negate(p.literal("{"))
                                                                  + p.any()) + p.tag("suffix", p.marker()))
                res = anywhere(sp, diff.suffix)
                if res.success:
                    self.set_call_id(suffix=res.get("suffix"))
            elif apre >= 0:
                self.set_call_id(pos=CallIdPosition.POST_ARGS)
                after_args = diff.prefix[apre:]
                brace = after_args.rfind("}")
                if brace >= 0:
                    self.set_call_id(prefix=_find_last_marker(after_args[brace + 1:]))
                self.set_call_id(suffix=_find_first_marker(diff.suffix))
        elif fsuf >= 0 and fpre < 0:
            self.set_call_id(pos=CallIdPosition.PRE_FUNC_NAME, prefix=_find_last_marker(diff.prefix),
                             suffix=_find_first_marker(diff.suffix[:fsuf]))
        cid = self.call_id
        if cid.prefix == self.arguments.end:
            self.set_call_id(prefix="")
        if cid.suffix == self.arguments.start:
            self.set_call_id(suffix="")
        cid = self.call_id
        if cid.pos is not CallIdPosition.NONE and cid.suffix and self.format.per_call_end.startswith(cid.suffix):
            self.set_format(per_call_end="")


def _LAST_MARKER_TAIL(tag: str) -> Any:
    return parser("last_marker_tail:" + tag, lambda p: p.zero_or_more(p.negate(last_marker_with_tail(p)) + p.any())
                  + p.tag(tag, last_marker_with_tail(p)))


def _find_last_marker(s: str) -> str:
    p = parser("id.last_marker", lambda b: b.zero_or_more(b.negate(last_marker_with_tail(b)) + b.any())
               + b.tag("m", b.marker()))
    res = anywhere(p, s)
    return res.get("m") if res.success else ""


def _find_first_marker(s: str) -> str:
    res = anywhere(parser("id.first_marker", lambda b: b.tag("m", b.marker())), s, starts=MARKER_START)
    return res.get("m") if res.success else ""


def _count(haystack: str, needle: str) -> int:
    return haystack.count(needle)


def analyze_tools(r: DiffRenderer, caps: TemplateCaps, reasoning: ReasoningAnalysis) -> ToolsAnalysis:
    t = _ToolAnalyzer(r)
    t.analyze_tool_calls(reasoning, caps.supports_parallel_tool_calls)
    if t.format.mode not in (ToolFormat.NONE, ToolFormat.JSON_NATIVE):
        if caps.supports_parallel_tool_calls:
            t.check_per_call_markers()
        t.extract_function_markers()
        if t.format.mode is ToolFormat.TAG_WITH_TAGGED:
            t.extract_argument_name_markers()
            t.extract_argument_value_markers()
        t.extract_argument_separator()
        # extract_args_markers only acts in JSON_NATIVE mode and is only reached for the other modes: skipped.
        t.extract_call_id_markers()
    return t.result()
