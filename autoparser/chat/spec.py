"""A chat format as data, and the one function that turns it into ChatParams for a request.

llama.cpp writes each of its specialised formats (common/chat.cpp, parsers/*.cpp) as a function that renders
the prompt, patches the generation prompt for a continued message, builds the PEG parser, decides whether the
grammar is lazy and which triggers wake it, and fills `common_chat_params`. Here a format is a `FormatSpec`:
its markers and flags as fields, and one small build function for its parser. `assemble` (autoparser/params)
does the rest, the same way for every format, the specialised ones (chat/handlers/) and the one derived from a
template's analysis (chat/generic.py) alike. Where the C++ formats disagree on a rule (when the grammar is lazy,
which `json_schema` counts as a response format, whether triggers are listed for a non-lazy grammar), the rule
is a field, so the difference is visible in one place.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from autoparser.analysis.model import ReasoningAnalysis, TemplateAnalysis
from autoparser.chat.builder import ChatBuilder
from autoparser.chat.constraint import CallTags
from autoparser.chat.inputs import GenerationInputs, generation_prompt, render_prompt
from autoparser.chat.request import Continuation, ToolChoice, render_content
from autoparser.chat.tools import Function, functions
from autoparser.errors import TemplateError
from autoparser.peg.builder import P
from autoparser.template.render import ChatTemplate
from autoparser.types import ChatFormat

__all__ = ["Build", "FormatSpec", "GrammarTrigger", "Laziness", "Prefill", "Rendered", "SchemaRule", "TriggerType",
           "pattern", "render", "word"]


class TriggerType(IntEnum):
    TOKEN = 0
    WORD = 1
    PATTERN = 2
    PATTERN_FULL = 3


@dataclass(frozen=True)
class GrammarTrigger:
    type: TriggerType
    value: str
    token: int = -1

    def to_dict(self) -> dict[str, Any]:
        """The C++ record shape: `token` only for TOKEN triggers."""
        out: dict[str, Any] = {"type": int(self.type), "value": self.value}
        if self.type == TriggerType.TOKEN:
            out["token"] = self.token
        return out





class Laziness(enum.Enum):
    """When the grammar is lazy (applies only once a trigger appears). The C++ formats differ only when a
    response format and tools come in the same request."""

    UNLESS_FORCED = "unless-forced"
    """Lazy unless a response format or `tool_choice: required` forces constrained output."""
    TOOLS_AUTO = "tools-auto"
    """Lazy when tools are given and `tool_choice` is auto."""
    TOOLS_NOT_REQUIRED = "tools-not-required"
    """Lazy when tools are given and `tool_choice` is not required."""


class SchemaRule(enum.Enum):
    """Which request `json_schema` makes a response format (`is_object()`, with or without `!empty()`)."""

    IGNORED = "ignored"
    OBJECT = "object"
    NON_EMPTY_OBJECT = "non-empty-object"

    def given(self, schema: Any) -> bool:
        if self is SchemaRule.IGNORED or not isinstance(schema, dict):
            return False
        return self is SchemaRule.OBJECT or bool(schema)


@dataclass(frozen=True)
class Rendered:
    """The prompt and the generation prompt (the suffix `add_generation_prompt` adds) of a request."""

    prompt: str
    generation_prompt: str
    context: str = "llama.cpp"  # the variables the template saw (see `render`)


@dataclass(frozen=True)
class Prefill:
    """What the model's turn already holds when the last message is continued: the generation prompt rebuilt
    around the message's reasoning and content (the `has_continuation()` branch of the C++ formats).

    `prefix` opens the turn (None: the generation prompt the template rendered). With `reasoning_start`, the
    message's reasoning follows it, and for a content continuation `reasoning_end` and the content; without
    one, the content follows the prefix when the content is continued.
    """

    prefix: str | None
    reasoning_start: str | None = None
    reasoning_end: str = ""

    def __call__(self, rendered: Rendered, msg: Mapping[str, Any], continuation: Continuation) -> str:
        out = rendered.generation_prompt if self.prefix is None else self.prefix
        if self.reasoning_start is not None:
            out += self.reasoning_start + str(msg.get("reasoning_content") or "")
            if continuation == Continuation.CONTENT:
                out += self.reasoning_end
        if continuation == Continuation.CONTENT:
            out += render_content(msg)
        return out


@dataclass(frozen=True)
class Build:
    """What a format's build function sees: the builder, the request, and the flags `assemble` derived."""

    p: ChatBuilder
    inputs: GenerationInputs
    generation_prompt: str
    """As the template rendered it (before a continued message is added)."""
    response_format: bool
    extract_reasoning: bool
    prompt: str = ""
    """The whole prompt as the template rendered it."""
    prompt_opened: bool = False
    """The prompt leaves a reasoning block open that llama.cpp does not read (set by a relaxed build only:
    chat/generic.py `_relaxed_build`)."""
    reasoning_open: bool = False
    """That block opens before the generation prompt begins: the output starts inside it."""
    typed_reasoning: ReasoningAnalysis | None = None
    """The reasoning block the template writes only from typed content, which llama.cpp does not read: the
    output's reasoning parser reads it, the rest of the build is llama.cpp's (set by a relaxed build only:
    chat/generic.py `_relaxed_build`)."""

    @property
    def tools(self) -> bool:
        return self.inputs.has_tools

    @property
    def tool_calls(self) -> bool:
        """Tools were given and may be called."""
        return self.inputs.has_tools and self.inputs.tool_choice != ToolChoice.NONE

    @property
    def required(self) -> bool:
        """`tool_choice: required`: the output must call a tool."""
        return self.inputs.tool_choice == ToolChoice.REQUIRED

    @property
    def parallel(self) -> bool:
        return self.inputs.parallel_tool_calls

    @property
    def call_counts(self) -> tuple[int, int]:
        """(min, max) number of calls for `repeat`: at least one when required, any number when parallel."""
        return (1 if self.required else 0), (-1 if self.parallel else 1)

    @property
    def constrained(self) -> bool:
        """A grammar goes with this request: a response format, or tools that may be called."""
        return self.response_format or self.tool_calls


@dataclass(frozen=True)
class FormatSpec:
    """One chat format: its parser (`build`), its markers and the rules the C++ applies to it."""

    name: str
    build: Callable[[Build], P]
    prefill: Callable[[Rendered, Mapping[str, Any], Continuation], str]
    format: ChatFormat = ChatFormat.PEG_NATIVE
    triggers: tuple[GrammarTrigger, ...] = ()
    tool_trigger: GrammarTrigger | None = None
    """A trigger per function tool (after `triggers`): this one with `{name}` replaced by the tool's name
    (regex-escaped in a pattern), where a call opens with its name and no marker of its own."""
    triggers_only_when_lazy: bool = False
    laziness: Laziness = Laziness.UNLESS_FORCED
    response_format: SchemaRule = SchemaRule.NON_EMPTY_OBJECT
    calls: bool = True
    """The format can express tool calls (a derived format without a tool syntax cannot)."""
    reasoning: bool = True
    """The format has reasoning to extract (with `reasoning_format` other than none)."""
    supports_thinking: bool = False
    thinking_start_tag: str = ""
    thinking_end_tags: tuple[str, ...] = ()
    message_delimiters: tuple[tuple[str, str], ...] = ()
    preserved_tokens: tuple[str, ...] = ()
    additional_stops: tuple[str, ...] = ()
    messages: Callable[[Sequence[Mapping[str, Any]]], Sequence[Mapping[str, Any]]] | None = None
    """The messages as this template wants them (rendering only; the request keeps its own)."""
    context: Callable[[GenerationInputs], Mapping[str, Any] | None] | None = None
    """Extra template variables for a request."""
    generation_prompt: str | None = None
    """A fixed generation prompt, where the template's own would be wrong."""
    fix_prompt: Callable[[Rendered, GenerationInputs], Rendered] | None = None
    """A fix-up of the rendered prompt the C++ applies for this format."""
    relaxes: bool = False
    """The build function asks the builder's hooks for pieces models write beyond the template: a relaxed
    parser (the same build on the recovery's relaxed builder) is built beside the strict one."""
    relaxed_build: Callable[[Build], P] | None = None
    """The relaxed parser's build, where it reads what the strict build cannot ask a hook for (a derived
    format's reasoning block the prompt leaves open); None: `build`."""
    calls_as_analysed: bool = False
    """The calls are as the template's analysis describes them (the handler is for how they are read: values
    typed per parameter, arguments in any order), so that the structural tag and Lark exports
    (export/constrained.py) derive them from the analysis, as for a derived format; checked by the exports'
    consumers over the corpus (tests/export/test_consumers.py)."""
    fit: Callable[[FormatSpec, TemplateAnalysis], FormatSpec] | None = None
    """The spec as one template of the family writes what its analysis shows (the whitespace around a
    parameter's value), where the family's templates differ in it and the C++ builds one form for all
    (params/generator.py `_format`); None: the spec as detected."""
    call_tags: Callable[[Sequence[Function], bool], CallTags] | None = None
    """How a hand-written format writes a request's calls (its functions; parallel calls or not), for the
    structural tag and Lark exports, where its analysis does not describe them (None: it cannot be said, or
    `calls_as_analysed`)."""
    response_fields: Mapping[str, Any] | None = None
    """A hand-written format's Hugging Face response_template fields (`response_fields`; autoparser/export adds
    the template's start anchor), where that language can say it (None: it cannot, or nobody has written it);
    the "thinking" field is dropped when `reasoning` is off."""

    def lazy(self, b: Build) -> bool:
        match self.laziness:
            case Laziness.UNLESS_FORCED:
                return not b.response_format and b.inputs.tool_choice == ToolChoice.AUTO
            case Laziness.TOOLS_AUTO:
                return b.tools and b.inputs.tool_choice == ToolChoice.AUTO
            case Laziness.TOOLS_NOT_REQUIRED:
                return b.tools and not b.required
        raise AssertionError(self.laziness)

    def grammar_triggers(self, inputs: GenerationInputs) -> tuple[GrammarTrigger, ...]:
        t = self.tool_trigger
        if t is None:
            return self.triggers
        literal = t.type in (TriggerType.WORD, TriggerType.TOKEN)
        return self.triggers + tuple(
            GrammarTrigger(t.type, t.value.replace("{name}", f.name if literal else re.escape(f.name)))
            for f in functions(inputs.tools))


# --- Hugging Face response_template pieces (autoparser/export), for the formats written by hand --------------------

def call_transform(name: str, arguments: str) -> dict[str, Any]:
    """The transform that makes a call as transformers and vLLM expect it, from two placeholders."""
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


# A call from a captured `name` and the region's parsed arguments.
CALL_TRANSFORM: Mapping[str, Any] = call_transform("{name}", "{content}")


# The content as the implicit field: every piece of text no other field takes, joined (without `join`, the
# whitespace after the last call would replace the text before the calls).
IMPLICIT_CONTENT: Mapping[str, Any] = {"repeats": True, "join": ""}


def thinking_field(start: str, end: str) -> dict[str, Any]:
    """The response_template field `thinking` between two reasoning markers, as literals: vLLM's `beam` parser
    derives its structural tag only from literal openers and closers (a prompt that opens the reasoning shows its
    start to the parser through the start anchor, autoparser/export)."""
    return {"open": start.strip(), "close": end.strip()}


def opened_by_its_end(thinking: Mapping[str, Any]) -> dict[str, Any]:
    """The field `thinking` where the parser sees the output alone (no start anchor), and so never a reasoning
    start the prompt wrote: a bare end marker opens an empty region that it then closes, instead of landing in
    the content."""
    start, end = thinking["open"], thinking["close"]
    return {"open_pattern": f"{re.escape(start)}|(?={re.escape(end)})", "close": end}


def closers_pattern(*closers: str, newline_before: bool = False) -> str:
    """A region's closers in order, as a regex, with the newline a template writes between them and after them
    (the one between two calls), and before them where `newline_before` (after tagged arguments; not after JSON,
    which may end in whitespace itself): a finite set of literals, which vLLM's `beam` parser expands into its
    structural tag's closers (it refuses `\\s*`, more than 16 literals, and closers that arguments could begin to
    spell: EXPORT-FORMATS.md §2)."""
    return (r"\n?" if newline_before else "") + r"\n?".join(re.escape(c.strip()) for c in closers if c.strip()) \
        + r"\n?"


def markup_field(markers: Sequence[str]) -> dict[str, Any]:
    """The field `markup`: markers that belong to no value (a call section's end after the last call, a turn's
    hand-over to the tool). Each opens an empty region that the next character closes, so that it is not
    content; an empty field is left out of the message. (A call's closer cannot take an optional section end
    after it: transformers' stream commits the closer before the end arrives.)"""
    return {"open": sorted({m.strip() for m in markers if m.strip()}, key=lambda m: (-len(m), m)),
            "close_pattern": r"(?=[\s\S])"}


def response_fields(tool_calls: Mapping[str, Any], *, thinking: tuple[str, str] | None = None,
                    content: Mapping[str, Any] | None = None, markup: Sequence[str] = ()) -> dict[str, Any]:
    """A response_template's fields (its start anchor is the template's, autoparser/export finds it): `content`
    is the implicit field unless given markers; `markup`, markers of no field (`markup_field`)."""
    fields: dict[str, Any] = {}
    if thinking is not None:
        fields["thinking"] = thinking_field(*thinking)
    fields["content"] = dict(content) if content else dict(IMPLICIT_CONTENT)
    fields["tool_calls"] = dict(tool_calls)
    if markup:
        fields["markup"] = markup_field(markup)
    return fields


def word(text: str) -> GrammarTrigger:
    """A trigger that wakes a lazy grammar where `text` appears in the output."""
    return GrammarTrigger(TriggerType.WORD, text)


def pattern(regex: str) -> GrammarTrigger:
    """A trigger that wakes a lazy grammar where `regex` matches (from its first group, if it has one)."""
    return GrammarTrigger(TriggerType.PATTERN, regex)


def render(spec: FormatSpec, tmpl: ChatTemplate, inputs: GenerationInputs) -> Rendered:
    """The prompt and the generation prompt of `inputs`, with the format's message and context overrides."""
    messages = spec.messages(inputs.messages) if spec.messages is not None else None
    extra = spec.context(inputs) if spec.context is not None else None

    def rendered_in(cpp_context: bool) -> Rendered:
        prompt = render_prompt(tmpl, inputs, messages=messages, extra=extra, cpp_context=cpp_context)
        gp = spec.generation_prompt if spec.generation_prompt is not None else \
            generation_prompt(tmpl, inputs, messages=messages, extra=extra, cpp_context=cpp_context)
        return Rendered(prompt, gp, "llama.cpp" if cpp_context else "transformers")

    try:
        rendered = rendered_in(True)
    except TemplateError as refused:
        # llama.cpp gives up on this request: the template fails in its context, typically on `tools`, which it
        # leaves undefined without tools where transformers passes None (`tools is none`, then `tools|tojson`).
        # Rendered as transformers renders it; a template that fails there too raises the C++ context's error.
        try:
            rendered = rendered_in(False)
        except TemplateError:
            raise refused from None
    return spec.fix_prompt(rendered, inputs) if spec.fix_prompt is not None else rendered
