"""Realistic variants of well-formed outputs: what models write around their own template's markup.

The mutations (autoparser.corpus.mutations) break an output; a variant writes the same message as the template
does, in another layout real models (and their users' reports) show: the markup on one line or spread over
blank, indented lines, several calls in one section or one section per call, the section markers left out,
the reasoning start or end left out, a family's sibling dialects of a call's JSON arguments (the marker or the
fence before them left out, a fence added, OpenAI's wrapper around a call object, the arguments' other usual key),
a marker mentioned in the content, a closer cut short at the end. Each variant is built from one output of a
request and the message it means, with the markers the template's analysis found (`markers_of`: reasoning,
section and call markers, the request's triggers and closers) and the spans the request's relaxed parser reads in
that output (which text is markup, which a field, where each call stands); never from a model name. A kind
applies only where those markers are in the output (else it is skipped), and each variant says what must come
back (`Variant.checks`; `kept` compares).

    markers = markers_of(params, cached_analysis(source))
    for v in variants(params, output, expected, markers):
        problems = kept(v, params.parse(v.output))
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from autoparser.analysis.model import TemplateAnalysis
from autoparser.chat.compare import message_differences
from autoparser.chat.tags import (
    CONTENT,
    FIELD_TAGS,
    NAME_TAGS,
    REASONING,
    TOOL,
    TOOL_ARGS,
    TOOL_CLOSE,
    TOOL_ID,
    TOOL_NAME,
)
from autoparser.corpus.mutations import Mutation
from autoparser.params import ChatParams
from autoparser.peg import AstNode
from autoparser.peg.nodes import C_SPACE
from autoparser.recovery.coverage import SPECIAL_TOKEN
from autoparser.recovery.loose import FENCE
from autoparser.types import ChatMessage

__all__ = ["KINDS", "FormatMarkers", "Variant", "kept", "markers_of", "variants"]

# Each kind, where it applies, with one public report of it (where real models, or an engine's users, show it)
# and what the parse must give back. Every kind keeps the message the template's own output means: the calls,
# the reasoning and the content (`Variant.checks`), compared as the C++ tests compare them (ends of texts
# without whitespace, arguments as JSON); the ratchet's reason says which repairs the parse named, if any.
KINDS = (
    # The whitespace the template writes around every marker removed (the markup on one line): a model that
    # writes `<parameter=city>Paris</parameter>` for the template's `<parameter=city>\nParis\n</parameter>`
    # (ggml-org/llama.cpp#26763). Applies where whitespace touches a marker (not where it separates two words).
    "markers_without_space",
    # Blank lines and indentation added around the markers inside the calls (between markup, never into a
    # name, a value or a tag's own text): a Qwen 3.6 call written with every line of its markup indented
    # (ggml-org/llama.cpp#24644, "Failed to parse input").
    "markers_with_extra_space",
    # Each call in a section of its own where the template writes one section (its start and end) around all
    # calls: distilled DeepSeek checkpoints emit `<｜tool▁calls▁begin｜>...<｜tool▁calls▁end｜>` once per call
    # (verl-project/verl#7635, whose parser reads both). Applies to the parallel calls of a format with both
    # section markers.
    "one_section_per_call",
    # The reverse: several calls in one wrapper where the template writes a wrapper (a call opener and closer)
    # per call, the calls one per line: a `<tool_call>` holding several `<function=...>` blocks, which vLLM's
    # Qwen3-Coder parser reads whichever `<tool_call>` scope they stand in (vllm-project/vllm#41970). Applies
    # where each call's own text begins with a marker of its own (`<function=`, a JSON object).
    "calls_in_one_section",
    # The closer of each call but the last left out where the template writes a wrapper (an opener and a closer)
    # per call: the call ends where the next one's opener begins (`...}\n<tool_call>\n{...}</tool_call>`). A
    # call whose closing tag never arrives, which the strict reading throws away with the call
    # (JustVugg/colibri#505). Applies to the parallel calls of a format with both per-call markers.
    "closer_dropped_between_calls",
    # The section markers left out, each call keeping its own markers: DeepSeek V3.2/V4 invokes without the
    # section wrapper, which SGLang returns as content (sgl-project/sglang#40236). Applies where every call
    # begins with its own opener or function marker.
    "bare_calls",
    # The reasoning start the template writes (the prompt does not open it) left out, its end kept:
    # `reasoning</think>answer` from DeepSeek-R1-Distill (vllm-project/vllm#13125). vLLM, SGLang and Ollama
    # read the text before the stray end as reasoning: so must the parse.
    "reasoning_start_dropped",
    # Reasoning, then calls, without the reasoning end: Qwen3.5 calling tools without `</think>`
    # (ggml-org/llama.cpp#21118). The reasoning ends where the call begins (as vLLM reads it since
    # vllm-project/vllm#35687), the call is a call.
    "reasoning_end_dropped_before_calls",
    # The reasoning block the template writes first written after the answer instead: the model thinks again
    # once its answer began (TensorRT-LLM's tests/unittest/llmapi/test_reasoning_parser.py,
    # `test_interleaved_thinking_stream`; LMDeploy's `test_stream_chunk_preserves_order`). vLLM's, SGLang's and
    # TensorRT-LLM's reasoning parsers read it as reasoning: so must the parse. Applies where the model writes the
    # reasoning start (the prompt does not open it) and the reply is text only.
    "reasoning_after_content",
    # The opener of each argument's value left out where the template writes the argument's name between markers
    # of its own and then the value's opener (`<arg_key>city</arg_key>Paris</arg_value>`): a GLM-5.2 output
    # sampled in vllm-project/vllm#49248. The name's closer still says where the value begins.
    "value_opener_dropped",
    # The opener of each argument's name left out where the template writes the name between markers of its own
    # and then the value's opener (`get_weathercity</arg_key><arg_value>Paris</arg_value>days</arg_key>...`):
    # GLM-4.7 outputs quoted in vllm-project/vllm#47190 (`send_command_to_shellcommand</arg_key>`). The name's
    # closer still says where the name ends.
    "argument_opener_dropped",
    # The first value's closer written twice, on a line of its own (`</parameter>\n</parameter>`): Qwen 3.6 calls
    # quoted in ggml-org/llama.cpp#24807 and mostlygeek/llama-swap#856. The second closes nothing: markup.
    # Applies where a value's closer is a marker of its own (not also its opener, as FunctionGemma's `<escape>`).
    "value_closer_doubled",
    # The marker between a call's name (or id) and its JSON arguments left out, the arguments right after the
    # name: Mistral's `[TOOL_CALLS]get_weather{...}` beside the template's `[TOOL_CALLS]get_weather[ARGS]{...}`
    # (vLLM's tests/tool_parsers/test_mistral_tool_parser.py reads both). Applies where that marker is markup
    # of its own (not JSON's `"arguments": `, not a fence).
    "arguments_marker_dropped",
    # The code fence around a call's JSON arguments left out where the template writes one: DeepSeek V3's
    # `name\n```json\n{...}\n```` written as its V3.1 sibling writes it, the JSON bare (vLLM reads each with a
    # parser of its own: tool_parsers/deepseekv3_tool_parser.py, deepseekv31_tool_parser.py).
    "arguments_fence_dropped",
    # The reverse: JSON arguments written in a ```json fence where the template writes them bare after a marker
    # (`[ARGS]```json\n{...}\n````), as models write JSON they were not asked to fence: agents-flex/agents-flex#64
    # strips such fences from tool arguments before parsing them. Applies where kind `arguments_marker_dropped`
    # does.
    "arguments_fenced",
    # A JSON call object written in OpenAI's wire form, `{"type": "function", "function": {...}}`, where the
    # template writes the object bare: llama.cpp's own grammar accepts that wrapper for the calls of a JSON
    # format (`accept_openai_wrapper`, common/chat.cpp) because models trained on OpenAI-style data write it.
    "call_object_wrapped",
    # The arguments of a JSON call object under the other usual key, `"parameters"` for the template's
    # `"arguments"` or the reverse: Llama 3's calls write `parameters`, Hermes-style ones `arguments`, and engines
    # read either (vLLM's tool_parsers/llama_tool_parser.py, SGLang's base_format_detector.py; LMDeploy's
    # test_each_json_protocol_ignores_the_other_argument_field names both protocols).
    "arguments_key_renamed",
    # One of the format's markers (a call or section opener, else the reasoning start) written inside the
    # content, between two words: prose that mentions a marker must stay content, not become a phantom call
    # (vllm-project/vllm#48931). Policy: a leaked marker is kept in the content, not deleted; the content must
    # come back with it.
    "leaked_marker",
    # The output ends with a prefix of a closer (`</tool_ca`, `</th`; never inside a special token, which is one
    # token): the closer the output ends with cut, or the start of the reasoning end after the final content.
    # A generation stopped inside a marker (minpeter/ai-sdk-tool-call-middleware:
    # src/__tests__/protocols/hermes-protocol/stream/partial-end-tag.test.ts feeds `</tool_` as the last
    # chunk). The message comes back whole; the content may keep the cut closer at its end (`Variant.tail`).
    "partial_closer_at_end",
)

_ALL_FIELDS = ("reasoning_content", "content", "tool_calls")
# Fields whose text a marker's whitespace must not run into (a value, a name, prose): a variant adds whitespace
# only between markup, or before a call's JSON arguments, where JSON reads it as formatting.
_WORDS_FIELDS = frozenset(FIELD_TAGS - {TOOL_ARGS})
# What "extra space" is: a blank line, then an indentation (ggml-org/llama.cpp#24644 indents every line).
_EXTRA_SPACE = "\n\n  "


@dataclass(frozen=True)
class Variant(Mutation):
    """A well-formed output written in another layout: as a mutation, its kind, the output and the fields its
    parse must give back as `expected` ("reasoning_content", "content", "tool_calls"); and"""

    tail: str = ""
    """A text the content may end with beside `expected.content` (the cut closer of `partial_closer_at_end`,
    which the parse may keep as the content's last words: it is no marker yet)."""


@dataclass(frozen=True)
class FormatMarkers:
    """The markers of one request's format, as the output writes them without surrounding whitespace (empty
    where the format has none)."""

    reasoning_start: tuple[str, ...] = ()
    reasoning_end: tuple[str, ...] = ()
    section_start: str = ""
    section_end: str = ""
    call_start: str = ""
    call_end: str = ""
    function_start: str = ""
    """The marker a call's own text begins with (`<function=`), where the format has one."""
    value_start: str = ""
    """The marker a tagged value begins with, where the argument's name has a closer of its own before it
    (`<arg_value>` after `</arg_key>`)."""
    value_end: str = ""
    """The marker a tagged value ends with, where it is a closer of its own (`</parameter>`; not FunctionGemma's
    `<escape>`, which also opens the value)."""
    name_start: str = ""
    """The marker an argument's name begins with, where the name has a closer of its own and the value an opener
    (`<arg_key>` before `city</arg_key><arg_value>`)."""
    inner: tuple[str, ...] = ()
    """The markers inside a call (a function's name suffix and close, an argument's name and value markers, a
    call id's)."""
    others: tuple[str, ...] = ()
    """Markers the request's parser waits for beyond those (its trigger words and closers)."""

    @property
    def call_markers(self) -> tuple[str, ...]:
        """Every marker of a call or of the calls' section."""
        own = (self.section_start, self.section_end, self.call_start, self.call_end, self.function_start)
        return _unique((*own, *self.inner, *self.others))

    @property
    def all(self) -> tuple[str, ...]:
        return _unique((*self.reasoning_start, *self.reasoning_end, *self.call_markers))


def _core(marker: str) -> str:
    return marker.strip(C_SPACE)


def _unique(markers: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(c for c in map(_core, markers) if c))


def markers_of(params: ChatParams, analysis: TemplateAnalysis | None) -> FormatMarkers:
    """The markers of a request on a template: its analysis's, the request's thinking tags, grammar triggers and
    the closers its relaxed parser knows. Where the analysis has a reading as transformers renders the template
    (the one the parser is made from), its markers come first, the C++ record's where it has none: a format
    with a handler of its own may follow either."""
    starts = [params.thinking_start_tag]
    ends = list(params.thinking_end_tags)
    section_start = section_end = call_start = call_end = function_start = value_start = value_end = name_start = ""
    inner: list[str] = []
    for reading in () if analysis is None else dict.fromkeys((analysis.effective, analysis)):
        starts.append(reading.reasoning.start)
        ends.append(reading.reasoning.end)
        if reading.prompt_reasoning is not None:
            starts.append(reading.prompt_reasoning.start)
            ends.append(reading.prompt_reasoning.end)
        tools = reading.tools
        fmt, fun, args, ids = tools.format, tools.function, tools.arguments, tools.call_id
        if not section_start and reading.call_form is not None:
            section_start, section_end = _core(reading.call_form.section_start), _core(reading.call_form.section_end)
        if not section_start:
            section_start, section_end = _core(fmt.section_start), _core(fmt.section_end)
        if not call_start and not call_end:
            call_start, call_end = _core(fmt.per_call_start), _core(fmt.per_call_end)
        function_start = function_start or _core(fun.name_prefix)
        if _core(args.name_suffix):
            value_start = value_start or _core(args.value_prefix)
            if _core(args.value_prefix):
                name_start = name_start or _core(args.name_prefix)
        closer = _core(args.value_suffix)
        if closer not in _core(args.name_suffix) and closer != _core(args.value_prefix):
            value_end = value_end or closer
        inner += [fun.name_suffix, fun.args_separator, fun.close, args.start, args.end, args.name_prefix,
                  args.name_suffix, args.value_prefix, args.value_suffix, args.separator, ids.prefix, ids.suffix]
    # (a closer of one character is a JSON object's brace: formatting of the arguments, no marker)
    others = [t.value for t in params.grammar_triggers] + [c for c in sorted(params.reader.plan.closers)
                                                           if len(_core(c)) > 1]
    return FormatMarkers(_unique(starts), _unique(ends), section_start, section_end, call_start, call_end,
                         function_start, value_start, value_end, name_start, _unique(inner), _unique(others))


@dataclass(frozen=True)
class _Layout:
    """Where the relaxed parser of the request reads the fields and calls of one output (offsets in the
    output)."""

    output: str
    fields: tuple[tuple[int, int, str], ...]
    """The innermost field nodes (content, reasoning, a call's name, id, arguments or values), in order."""
    calls: tuple[tuple[int, int], ...]
    """Each call's node."""

    def field_at(self, pos: int) -> str:
        """The tag of the field holding the character at `pos` ("" for markup)."""
        for start, end, tag in self.fields:
            if start <= pos < end:
                return tag
        return ""

    def occurrences(self, marker: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
        """Where `marker` stands in the output as markup: not inside a field (a call id, which holds the name
        its markers surround, excepted)."""
        stop = len(self.output) if end is None else end
        out = []
        at = self.output.find(marker, start, stop)
        while at >= 0:
            if not any(s < at + len(marker) and at < e and tag != TOOL_ID for s, e, tag in self.fields):
                out.append((at, at + len(marker)))
            at = self.output.find(marker, at + len(marker), stop)
        return out

    def last_words_field(self, before: int) -> int:
        """Where the last content or reasoning that ends before `before` ends (0 if none)."""
        return max((e for s, e, t in self.fields if t in (CONTENT, REASONING) and e <= before), default=0)


def _layout(params: ChatParams, output: str) -> _Layout | None:
    """The relaxed parser's reading of a complete output; None where it cannot read it all."""
    reader = params.reader
    offset = reader.offset
    result = reader.complete_parse(reader.generation_prompt + output)
    if result.fail or result.end < len(reader.generation_prompt + output.rstrip(C_SPACE)):
        return None
    ast = result.ast

    def innermost(node: AstNode) -> bool:  # (tagged arguments' tool-args node holds their markup too)
        return not any(d.tag in FIELD_TAGS for d in ast.walk(node.children))

    nodes = list(ast.walk(result.nodes))
    # (a call id that holds the name is kept whole: `functions.get_weather:0` is text, not markup)
    fields = sorted((max(n.start - offset, 0), n.end - offset, n.tag) for n in nodes
                    if n.tag in FIELD_TAGS and (innermost(n) or n.tag == TOOL_ID) and n.end > offset)
    parent = {c: n.id for n in nodes for c in n.children}
    calls = set()
    for name in (n for n in nodes if n.tag == TOOL_NAME and n.start >= offset):
        # A call is the tool node around its name; where the format tags none, the smallest node holding the
        # name and the call's arguments (or its close).
        at = name.id
        while at in parent:
            node = ast.get(parent[at])
            at = node.id
            if node.tag == TOOL or any(d.tag in (TOOL_ARGS, TOOL_CLOSE) for d in ast.walk(node.children)):
                calls.add((node.start - offset, node.end - offset))
                break
    return _Layout(output, tuple(fields), tuple(sorted(calls)))


def variants(params: ChatParams, output: str, expected: ChatMessage, markers: FormatMarkers,
             kinds: Iterable[str] = KINDS) -> Iterator[Variant]:
    """The variants of `kinds` that apply to this output of this request (each at most once), in the order of
    KINDS."""
    wanted = set(kinds)
    layout = _layout(params, output)
    if layout is None:
        return
    made = (
        ("markers_without_space", _without_space),
        ("markers_with_extra_space", _with_extra_space),
        ("one_section_per_call", _one_section_per_call),
        ("calls_in_one_section", _calls_in_one_section),
        ("closer_dropped_between_calls", _closer_dropped_between_calls),
        ("bare_calls", _bare_calls),
        ("reasoning_start_dropped", _reasoning_start_dropped),
        ("reasoning_end_dropped_before_calls", _reasoning_end_dropped),
        ("reasoning_after_content", _reasoning_after_content),
        ("value_opener_dropped", _value_opener_dropped),
        ("argument_opener_dropped", _argument_opener_dropped),
        ("value_closer_doubled", _value_closer_doubled),
        ("arguments_marker_dropped", _arguments_marker_dropped),
        ("arguments_fence_dropped", _arguments_fence_dropped),
        ("arguments_fenced", _arguments_fenced),
        ("call_object_wrapped", _call_object_wrapped),
        ("arguments_key_renamed", _arguments_key_renamed),
        ("leaked_marker", _leaked_marker),
        ("partial_closer_at_end", _partial_closer),
    )
    for kind, make in made:
        if kind in wanted:
            variant = make(params, layout, expected, markers)
            if variant is not None and variant.output != output:
                yield variant


def kept(variant: Variant, got: ChatMessage) -> list[str]:
    """What the parse of a variant lost of what it must keep ([] when it read the variant as meant)."""
    have = got
    content = got.content.rstrip(C_SPACE)
    # (the cut closer, or what of it the parse keeps as text: a cut special token at the end is formatting)
    kept_tail = next((variant.tail[:n] for n in range(len(variant.tail), 0, -1) if content.endswith(variant.tail[:n])),
                     "")
    if kept_tail:
        have = replace(got, content=content[:-len(kept_tail)])
    want = replace(ChatMessage(), **{f: getattr(variant.expected, f) for f in variant.checks})
    have = replace(ChatMessage(), **{f: getattr(have, f) for f in variant.checks})
    return message_differences(want, have, compare_ids=False)


# --- the kinds --------------------------------------------------------------------------------------------


def _marker_spans(layout: _Layout, markers: Iterable[str]) -> list[tuple[int, int]]:
    """The markup occurrences of `markers` in the output, the longer marker first where two overlap."""
    taken: list[tuple[int, int]] = []
    for marker in sorted(set(markers), key=len, reverse=True):
        for s, e in layout.occurrences(marker):
            if not any(s < te and ts < e for ts, te in taken):
                taken.append((s, e))
    return sorted(taken)


def _space_before(text: str, pos: int) -> int:
    while pos > 0 and text[pos - 1] in C_SPACE:
        pos -= 1
    return pos


def _space_after(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in C_SPACE:
        pos += 1
    return pos


def _rewrite(text: str, runs: dict[tuple[int, int], str]) -> str:
    """`text` with each (start, end) run replaced (runs do not overlap)."""
    out, pos = [], 0
    for (start, end), new in sorted(runs.items()):
        if start < pos:
            continue
        out += [text[pos:start], new]
        pos = end
    return "".join(out) + text[pos:]


def _sides(text: str, run: tuple[int, int]) -> tuple[str, str]:
    """The characters on either side of a run ("" at the text's ends)."""
    return text[run[0] - 1] if run[0] > 0 else "", text[run[1]] if run[1] < len(text) else ""


def _between_words(text: str, run: tuple[int, int]) -> bool:
    """Whether a run separates two words."""
    return all(c.isalnum() or c == "_" for c in _sides(text, run))


def _word_side(text: str, run: tuple[int, int]) -> bool:
    """Whether a word or a quote touches a run: inside a tag's own text (`<|open|>call tool="x"`), where
    whitespace is no layout."""
    return any(c.isalnum() or c in "_\"'" for c in _sides(text, run))


def _without_space(params: ChatParams, layout: _Layout, expected: ChatMessage, m: FormatMarkers) -> Variant | None:
    text = layout.output
    runs: dict[tuple[int, int], str] = {}
    for s, e in _marker_spans(layout, m.all):
        for run in ((_space_before(text, s), s), (e, _space_after(text, e))):
            # (not between two words: `commentary to=` would become one word)
            if run[0] < run[1] and not _between_words(text, run):
                runs[run] = ""
    return Variant("markers_without_space", _rewrite(text, runs), expected, _ALL_FIELDS) if runs else None


def _calls_region(layout: _Layout) -> tuple[int, int] | None:
    """From the end of the content or reasoning before the first call to the start of the content after the
    last one: the markup of the calls."""
    if not layout.calls:
        return None
    first, last = layout.calls[0][0], layout.calls[-1][1]
    after = min((s for s, _, t in layout.fields if t in (CONTENT, REASONING) and s >= last), default=len(layout.output))
    return layout.last_words_field(first), after


def _with_extra_space(params: ChatParams, layout: _Layout, expected: ChatMessage,
                      m: FormatMarkers) -> Variant | None:
    region = _calls_region(layout)
    if region is None:
        return None
    text = layout.output
    spans = [(s, e) for s, e in _marker_spans(layout, m.call_markers) if region[0] <= s < region[1]]
    if not spans:
        return None
    first, last = spans[0][0], spans[-1][1]  # (inside the calls: from their first marker to their last)
    runs: dict[tuple[int, int], str] = {}
    for s, e in spans:
        before, after = (_space_before(text, s), s), (e, _space_after(text, e))
        # (never into a name, a value or prose, nor into a tag's own text: whitespace there is text)
        if before[0] > first and layout.field_at(before[0] - 1) not in _WORDS_FIELDS \
                and not _word_side(text, before):
            runs[before] = _EXTRA_SPACE
        if after[1] < last and layout.field_at(after[1]) not in _WORDS_FIELDS and not _word_side(text, after):
            runs[after] = _EXTRA_SPACE
    return Variant("markers_with_extra_space", _rewrite(text, runs), expected, _ALL_FIELDS) if runs else None


@dataclass(frozen=True)
class _Calls:
    """The calls of an output with their own markers: each call's span (its opener and closer included where
    the format has per-call ones), and where those stand."""

    units: tuple[tuple[int, int], ...]
    openers: tuple[tuple[int, int] | None, ...]
    closers: tuple[tuple[int, int] | None, ...]
    section_start: tuple[int, int] | None
    section_end: tuple[int, int] | None
    sections: int
    """How often the section start stands in the calls' markup."""


def _calls(layout: _Layout, m: FormatMarkers) -> _Calls | None:
    region = _calls_region(layout)
    if region is None:
        return None
    units: list[tuple[int, int]] = []
    openers: list[tuple[int, int] | None] = []
    closers: list[tuple[int, int] | None] = []
    calls = layout.calls
    for i, (start, end) in enumerate(calls):
        lo = units[-1][1] if units else region[0]
        hi = calls[i + 1][0] if i + 1 < len(calls) else region[1]
        opener = layout.occurrences(m.call_start, lo, start)[-1:] if m.call_start else []
        closer = layout.occurrences(m.call_end, end, hi)[:1] if m.call_end else []
        openers.append(opener[0] if opener else None)
        closers.append(closer[0] if closer else None)
        units.append((opener[0][0] if opener else start, closer[0][1] if closer else end))
    starts = layout.occurrences(m.section_start, *region) if m.section_start else []
    before = [o for o in starts if o[1] <= units[0][0]]
    ends = layout.occurrences(m.section_end, units[-1][1], region[1]) if m.section_end else []
    return _Calls(tuple(units), tuple(openers), tuple(closers), before[-1] if before else None,
                  ends[0] if ends else None, len(starts))


def _one_section_per_call(params: ChatParams, layout: _Layout, expected: ChatMessage,
                          m: FormatMarkers) -> Variant | None:
    calls = _calls(layout, m)
    if calls is None or len(calls.units) < 2 or calls.sections != 1 or not calls.section_start \
            or not calls.section_end:
        return None
    text, units = layout.output, calls.units
    opening = text[calls.section_start[0]:units[0][0]]
    closing = text[units[-1][1]:calls.section_end[1]]
    out = [text[:calls.section_start[0]]]
    for i, (start, end) in enumerate(units):
        out += [opening, text[start:end], closing]
        if i + 1 < len(units):
            between = text[end:units[i + 1][0]]
            out.append(between if not between.strip(C_SPACE) else "")  # (a list's `, ` has no place there)
    out.append(text[calls.section_end[1]:])
    return Variant("one_section_per_call", "".join(out), expected, _ALL_FIELDS)


def _own_marker(layout: _Layout, m: FormatMarkers, start: int, *, json: bool = True) -> bool:
    """Whether the call whose node starts at `start` begins with a marker of its own (the function marker, or,
    with `json`, a JSON object), so that calls read one after another without their wrapper."""
    body = layout.output[start:]
    return (json and body.startswith("{")) or bool(m.function_start and body.startswith(m.function_start))


def _calls_in_one_section(params: ChatParams, layout: _Layout, expected: ChatMessage,
                          m: FormatMarkers) -> Variant | None:
    calls = _calls(layout, m)
    if calls is None or len(calls.units) < 2 or calls.sections or None in calls.openers \
            or None in calls.closers or not all(_own_marker(layout, m, s) for s, _ in layout.calls):
        return None
    text = layout.output
    openers = [o for o in calls.openers if o is not None]
    closers = [c for c in calls.closers if c is not None]
    out = text[:closers[0][0]].rstrip(C_SPACE)
    for i in range(1, len(openers)):
        stop = closers[i][0] if i + 1 < len(openers) else len(text)
        piece = text[openers[i][1]:stop].lstrip(C_SPACE)
        out += "\n" + (piece.rstrip(C_SPACE) if i + 1 < len(openers) else piece)
    return Variant("calls_in_one_section", out, expected, _ALL_FIELDS)


def _closer_dropped_between_calls(params: ChatParams, layout: _Layout, expected: ChatMessage,
                                  m: FormatMarkers) -> Variant | None:
    calls = _calls(layout, m)
    if calls is None or len(calls.units) < 2 or None in calls.openers or None in calls.closers:
        return None
    dropped = {closer: "" for closer in calls.closers[:-1] if closer is not None}
    return Variant("closer_dropped_between_calls", _rewrite(layout.output, dropped), expected, _ALL_FIELDS)


def _bare_calls(params: ChatParams, layout: _Layout, expected: ChatMessage, m: FormatMarkers) -> Variant | None:
    calls = _calls(layout, m)
    if calls is None or calls.sections != 1 or calls.section_start is None:
        return None
    own = (o is not None or _own_marker(layout, m, s, json=False) for o, (s, _) in zip(calls.openers, layout.calls))
    if not all(own):
        return None  # (without the section, no marker would say where a call begins)
    text = layout.output
    runs = {(calls.section_start[0], _space_after(text, calls.section_start[1])): ""}
    if calls.section_end is not None:
        runs[(_space_before(text, calls.section_end[0]), calls.section_end[1])] = ""
    return Variant("bare_calls", _rewrite(text, runs), expected, _ALL_FIELDS)


def _reasoning_start_dropped(params: ChatParams, layout: _Layout, expected: ChatMessage,
                             m: FormatMarkers) -> Variant | None:
    text = layout.output
    lead = _space_after(text, 0)
    start = next((s for s in m.reasoning_start if text.startswith(s, lead)), "")
    if not start or not expected.reasoning_content.strip(C_SPACE) or params.prompt.rstrip(C_SPACE).endswith(start):
        return None  # (where the prompt opens the reasoning, the output never starts with it)
    if not any(layout.occurrences(e, lead + len(start)) for e in m.reasoning_end):
        return None
    return Variant("reasoning_start_dropped", text[:lead] + text[_space_after(text, lead + len(start)):], expected,
                   _ALL_FIELDS)


def _reasoning_end_dropped(params: ChatParams, layout: _Layout, expected: ChatMessage,
                           m: FormatMarkers) -> Variant | None:
    if not expected.tool_calls or not expected.reasoning_content.strip(C_SPACE) or not layout.calls:
        return None
    text, first = layout.output, layout.calls[0][0]
    reasoning_end = max((e for s, e, t in layout.fields if t == REASONING and e <= first), default=None)
    if reasoning_end is None:
        return None
    found = [o for e in m.reasoning_end for o in layout.occurrences(e, reasoning_end, first)]
    if len(found) != 1:
        return None
    start, end = found[0]
    keep = "" if start > 0 and text[start - 1] in C_SPACE else "\n"  # (the call still on a line of its own)
    return Variant("reasoning_end_dropped_before_calls", text[:start] + keep + text[_space_after(text, end):],
                   expected, _ALL_FIELDS)


def _reasoning_after_content(params: ChatParams, layout: _Layout, expected: ChatMessage,
                             m: FormatMarkers) -> Variant | None:
    text = layout.output
    lead = _space_after(text, 0)
    start = next((s for s in m.reasoning_start if text.startswith(s, lead)), "")
    if not start or expected.tool_calls or not expected.reasoning_content.strip(C_SPACE) \
            or not expected.content.strip(C_SPACE) or params.prompt.rstrip(C_SPACE).endswith(start):
        return None
    ends = sorted(o for e in m.reasoning_end for o in layout.occurrences(e, lead + len(start)))
    contents = [(s, e) for s, e, t in layout.fields if t == CONTENT and text[s:e].strip(C_SPACE)]
    if not ends or len(contents) != 1 or contents[0][0] < ends[0][1] \
            or text[ends[0][1]:contents[0][0]].strip(C_SPACE):  # (only whitespace between: no header to keep)
        return None
    block, (first, last) = text[lead:ends[0][1]], contents[0]
    # the content where the block stood, and the block right after the content's last word
    words_end = _space_before(text, last)
    return Variant("reasoning_after_content", text[:lead] + text[first:words_end] + block + text[words_end:],
                   expected, _ALL_FIELDS)


def _dropped_in_calls(kind: str, marker: str, layout: _Layout, expected: ChatMessage) -> Variant | None:
    """The output with every occurrence of `marker` inside a call left out (None where the format has no such
    marker, or the calls hold none)."""
    dropped = {run: "" for start, end in layout.calls for run in layout.occurrences(marker, start, end)} \
        if marker else {}
    return Variant(kind, _rewrite(layout.output, dropped), expected, _ALL_FIELDS) if dropped else None


def _value_opener_dropped(params: ChatParams, layout: _Layout, expected: ChatMessage,
                          m: FormatMarkers) -> Variant | None:
    return _dropped_in_calls("value_opener_dropped", m.value_start, layout, expected)


def _argument_opener_dropped(params: ChatParams, layout: _Layout, expected: ChatMessage,
                             m: FormatMarkers) -> Variant | None:
    return _dropped_in_calls("argument_opener_dropped", m.name_start, layout, expected)


def _value_closer_doubled(params: ChatParams, layout: _Layout, expected: ChatMessage,
                          m: FormatMarkers) -> Variant | None:
    if not m.value_end:
        return None
    first = next((run for start, end in layout.calls for run in layout.occurrences(m.value_end, start, end)), None)
    if first is None:
        return None
    text = layout.output
    return Variant("value_closer_doubled", text[:first[1]] + "\n" + m.value_end + text[first[1]:], expected,
                   _ALL_FIELDS)


def _json_arguments(layout: _Layout) -> list[tuple[int, int, int]]:
    """For each call whose arguments are a JSON object after its name (or id): where the name ends, where the
    arguments begin and where they end (the markup between the first two is what the template writes between
    them)."""
    out = []
    for start, end in layout.calls:
        fields = [(s, e, t) for s, e, t in layout.fields if start <= s and e <= end]
        args = next(((s, e) for s, e, t in fields if t == TOOL_ARGS and layout.output.startswith("{", s)), None)
        if args is None:
            continue
        name_end = max((e for s, e, t in fields if t in NAME_TAGS | {TOOL_ID} and e <= args[0]), default=None)
        if name_end is not None:
            out.append((name_end, *args))
    return out


def _own_arguments_marker(between: str) -> bool:
    """Whether the text between a call's name and its JSON arguments is a marker of its own: markup, not the
    JSON of a call object (`", "arguments": `), a code fence, nor the one character that closes the tag the name
    stands in (`<function=get_weather>`)."""
    core = between.strip(C_SPACE)
    return len(core) > 1 and '"' not in core and "`" not in core


def _arguments_marker_dropped(params: ChatParams, layout: _Layout, expected: ChatMessage,
                              m: FormatMarkers) -> Variant | None:
    text = layout.output
    runs = {(name_end, args): "" for name_end, args, _ in _json_arguments(layout)
            if _own_arguments_marker(text[name_end:args])}
    return Variant("arguments_marker_dropped", _rewrite(text, runs), expected, _ALL_FIELDS) if runs else None


def _arguments_fence_dropped(params: ChatParams, layout: _Layout, expected: ChatMessage,
                             m: FormatMarkers) -> Variant | None:
    text = layout.output
    runs: dict[tuple[int, int], str] = {}
    for name_end, args, args_end in _json_arguments(layout):
        opening = text.rfind(FENCE, name_end, args)
        closing = _space_after(text, args_end)
        if opening < 0 or not text.startswith(FENCE, closing):
            continue
        runs[(opening, args)] = ""  # (the fence's language tag and line break go with it)
        runs[(args_end, closing + len(FENCE))] = ""
    return Variant("arguments_fence_dropped", _rewrite(text, runs), expected, _ALL_FIELDS) if runs else None


def _arguments_fenced(params: ChatParams, layout: _Layout, expected: ChatMessage,
                      m: FormatMarkers) -> Variant | None:
    text = layout.output
    runs: dict[tuple[int, int], str] = {}
    for name_end, args, args_end in _json_arguments(layout):
        if _own_arguments_marker(text[name_end:args]):
            runs[(args, args)] = FENCE + "json\n"
            runs[(args_end, args_end)] = "\n" + FENCE
    return Variant("arguments_fenced", _rewrite(text, runs), expected, _ALL_FIELDS) if runs else None


def _call_object_wrapped(params: ChatParams, layout: _Layout, expected: ChatMessage,
                         m: FormatMarkers) -> Variant | None:
    text = layout.output
    runs: dict[tuple[int, int], str] = {}
    for start, end in layout.calls:
        # (a call that is one JSON object whose first member is its name: `{"name": "get_weather", ...}`)
        name = next((s for s, e, t in layout.fields if t in NAME_TAGS and start <= s and e <= end), None)
        key = None if name is None else _NAME_MEMBER.search(text, start, name)  # (`$`: up to the name)
        if key is None or "{" in text[start:key.start()]:
            continue  # (no name member, or the template nests it already: OpenAI's wire form itself)
        try:
            _, close = _DECODER.raw_decode(text, key.start())
        except ValueError:
            continue
        # (one call's end may be where the next begins: what is added there is added in order)
        at = (key.start(), key.start())
        runs[at] = runs.get(at, "") + '{"type": "function", "function": '
        runs[(close, close)] = "}"
    return Variant("call_object_wrapped", _rewrite(text, runs), expected, _ALL_FIELDS) if runs else None


_OTHER_ARGUMENTS_KEY = {"arguments": "parameters", "parameters": "arguments"}
# A JSON member's key and colon, up to the arguments' object (`"arguments": `).
_ARGUMENTS_MEMBER = re.compile(r'"(arguments|parameters)"\s*:\s*$')


def _arguments_key_renamed(params: ChatParams, layout: _Layout, expected: ChatMessage,
                           m: FormatMarkers) -> Variant | None:
    text = layout.output
    runs: dict[tuple[int, int], str] = {}
    for start, end in layout.calls:
        args = next((s for s, e, t in layout.fields if t == TOOL_ARGS and start <= s and e <= end), None)
        key = None if args is None else _ARGUMENTS_MEMBER.search(text, start, args)
        if key is not None:
            runs[key.span(1)] = _OTHER_ARGUMENTS_KEY[key.group(1)]
    return Variant("arguments_key_renamed", _rewrite(text, runs), expected, _ALL_FIELDS) if runs else None


# The opening of a JSON object whose first member is a call's name, up to the name's text.
_NAME_MEMBER = re.compile(r'\{\s*"[A-Za-z_]+"\s*:\s*"$')
_DECODER = json.JSONDecoder()


def _leaked_marker(params: ChatParams, layout: _Layout, expected: ChatMessage, m: FormatMarkers) -> Variant | None:
    content = expected.content.strip(C_SPACE)
    marker = next((x for x in (m.call_start, m.section_start, m.function_start, *m.reasoning_start) if x), "")
    if not content or " " not in content or not marker:
        return None
    text = layout.output
    at = next((s + text[s:e].find(content) for s, e, t in layout.fields if t == CONTENT and content in text[s:e]),
              -1)
    if at < 0:
        return None
    # In the middle of the content, between two words, as prose that mentions the marker writes it.
    spaces = [i for i, c in enumerate(content) if c == " "]
    cut = min(spaces, key=lambda i: abs(i - len(content) // 2))
    leaked = content[:cut] + " " + marker + content[cut:]
    return Variant("leaked_marker", text[:at] + leaked + text[at + len(content):],
                   replace(expected, content=leaked), _ALL_FIELDS)


def _cut(marker: str) -> str:
    """A prefix of a closer, as a generation stopped inside it writes it (`</tool_ca`): never inside a special
    token the closer holds (`<|close|>think<|sep|>` stops at `<|close|>think`), which is one token."""
    at = max(2, len(marker) * 3 // 4)
    for token in SPECIAL_TOKEN.finditer(marker):
        if token.start() < at < token.end():
            at = token.start()
    return marker[:at]


def _partial_closer(params: ChatParams, layout: _Layout, expected: ChatMessage, m: FormatMarkers) -> Variant | None:
    # A special token is one token: a generation never stops inside one.
    closers = [c for c in (*m.reasoning_end, m.call_end, m.section_end, *m.inner, *m.others)
               if len(c) >= 3 and not SPECIAL_TOKEN.fullmatch(c)]
    if not closers:
        return None
    text = layout.output
    stripped = text.rstrip(C_SPACE)
    last = max(((s, e) for c in closers for s, e in layout.occurrences(c) if e == len(stripped)),
               key=lambda o: o[1] - o[0], default=None)
    if last is not None:  # the output ends with a closer: cut inside it
        cut = _cut(stripped[last[0]:last[1]])
        return Variant("partial_closer_at_end", stripped[:last[0]] + cut, expected, _ALL_FIELDS) if cut else None
    ends_in_words = any(t in (CONTENT, REASONING) and e >= len(stripped) for _, e, t in layout.fields)
    closer = next((c for c in m.reasoning_end if len(c) >= 3 and not SPECIAL_TOKEN.fullmatch(c)), "")
    if not ends_in_words or not closer or not expected.content.strip(C_SPACE):
        return None
    tail = _cut(closer)  # after the content, the beginning of a closer the format has
    if not tail:
        return None
    return Variant("partial_closer_at_end", stripped + tail, expected, _ALL_FIELDS, tail=tail)
