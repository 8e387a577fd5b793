"""Result types of the differential template analyzer (C++ `autoparser` struct and its sub-analyses).

Field and enum names follow chat-auto-parser.h so records compare directly with the C++ dump
(`to_dict()` has exactly the shape of tests/data/analysis.jsonl).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from autoparser.peg.nodes import C_SPACE
from autoparser.template.caps import TemplateCaps

__all__ = [
    "ArgumentsAnalysis",
    "CallForm",
    "CallIdAnalysis",
    "CallIdPosition",
    "CallSyntax",
    "ContentAnalysis",
    "ContentMode",
    "FunctionAnalysis",
    "NestedCall",
    "ReasoningAnalysis",
    "ReasoningMode",
    "StringValues",
    "TemplateAnalysis",
    "ToolFormat",
    "ToolFormatAnalysis",
    "ToolsAnalysis",
    "TypedArgument",
]


class ReasoningMode(enum.Enum):
    NONE = "NONE"
    TAG_BASED = "TAG_BASED"
    TOOLS_ONLY = "TOOLS_ONLY"


class ContentMode(enum.Enum):
    PLAIN = "PLAIN"
    ALWAYS_WRAPPED = "ALWAYS_WRAPPED"
    WRAPPED_WITH_REASONING = "WRAPPED_WITH_REASONING"


class ToolFormat(enum.Enum):
    NONE = "NONE"
    JSON_NATIVE = "JSON_NATIVE"
    TAG_WITH_JSON = "TAG_WITH_JSON"
    TAG_WITH_TAGGED = "TAG_WITH_TAGGED"


class CallIdPosition(enum.Enum):
    NONE = "NONE"
    PRE_FUNC_NAME = "PRE_FUNC_NAME"
    BETWEEN_FUNC_AND_ARGS = "BETWEEN_FUNC_AND_ARGS"
    POST_ARGS = "POST_ARGS"


class _CppRecord:
    """A sub-analysis whose C++ record is its fields, by name and in order: `to_dict()` writes an enum as its
    value, a tuple as a list and a sub-analysis as its own record."""

    # Declared so that mypy lets fields() read a subclass: every one is a dataclass.
    __dataclass_fields__: ClassVar[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {f.name: _record_value(getattr(self, f.name)) for f in fields(self)}


def _record_value(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, _CppRecord):
        return value.to_dict()
    return value


@dataclass(frozen=True)
class ReasoningAnalysis(_CppRecord):
    mode: ReasoningMode = ReasoningMode.NONE
    start: str = ""
    end: str = ""


@dataclass(frozen=True)
class ContentAnalysis(_CppRecord):
    mode: ContentMode = ContentMode.PLAIN
    start: str = ""
    end: str = ""
    requires_nonnull_content: bool = False

    def is_always_wrapped(self) -> bool:
        return self.mode is ContentMode.ALWAYS_WRAPPED and bool(self.start) and bool(self.end)


@dataclass(frozen=True)
class ToolFormatAnalysis(_CppRecord):
    mode: ToolFormat = ToolFormat.NONE
    section_start: str = ""
    section_end: str = ""
    per_call_start: str = ""
    per_call_end: str = ""
    fun_name_is_key: bool = False
    tools_array_wrapped: bool = False
    openai_wrapper_trigger: bool = False
    function_field: str = "function"
    name_field: str = "name"
    args_field: str = "arguments"
    id_field: str = ""
    gen_id_field: str = ""
    parameter_order: tuple[str, ...] = ()


@dataclass(frozen=True)
class FunctionAnalysis(_CppRecord):
    name_prefix: str = ""
    name_suffix: str = ""
    args_separator: str = ""
    close: str = ""


@dataclass(frozen=True)
class ArgumentsAnalysis(_CppRecord):
    start: str = ""
    end: str = ""
    name_prefix: str = ""
    name_suffix: str = ""
    value_prefix: str = ""
    value_suffix: str = ""
    separator: str = ""
    tolerate_intertag_whitespace: bool = False


@dataclass(frozen=True)
class CallIdAnalysis(_CppRecord):
    pos: CallIdPosition = CallIdPosition.NONE
    prefix: str = ""
    suffix: str = ""


@dataclass(frozen=True)
class ToolsAnalysis(_CppRecord):
    format: ToolFormatAnalysis = field(default_factory=ToolFormatAnalysis)
    function: FunctionAnalysis = field(default_factory=FunctionAnalysis)
    arguments: ArgumentsAnalysis = field(default_factory=ArgumentsAnalysis)
    call_id: CallIdAnalysis = field(default_factory=CallIdAnalysis)


class CallSyntax(enum.Enum):
    """How a call is written, for the forms the C++ analysis cannot describe (analysis/forms.py)."""

    PYTHONIC = "PYTHONIC"
    """`name(arg="value", n=1)`: Python keyword arguments, values as Python literals."""


class StringValues(enum.Enum):
    """How the template writes a string argument's value in a Python call."""

    LITERAL = "LITERAL"
    """As a Python literal: quoted, the quotes inside escaped (`city="Paris"`, `q='It\\'s'`)."""
    BARE = "BARE"
    """As it is, without quotes (`city=Paris`: `{{ key }}={{ value }}`)."""
    UNESCAPED = "UNESCAPED"
    """Between quotes, but as it is inside them (`city="say "hi""`: `'"' + value + '"'`)."""


@dataclass(frozen=True)
class TypedArgument:
    """Beyond the C++: how a template writes a tagged argument whose value is no string, where that differs from
    how it writes a string, which is what the C++ record holds (from a string value). FunctionGemma quotes strings
    only (`query:<escape>llama.cpp<escape>`, `max_results:3`); DeepSeek V4's DSML says the type in an attribute
    (`string="true">llama.cpp`, `string="false">3`)."""

    opener: str
    """What the template writes between the argument's name and such a value (`:`, `" string="false">`)."""
    closer: str
    """What it writes after the value (`</｜DSML｜parameter>\n`), or "" where a string's closer is its quote."""
    quote: str = ""
    """The marker around a string where only strings have one (`<escape>`): an object or a list is then written in
    the format's own syntax, strings in it between quotes, keys bare (`cfg:{k:<escape>v<escape>}`)."""

    def to_dict(self) -> dict[str, Any]:
        return {"opener": self.opener, "closer": self.closer, "quote": self.quote}


@dataclass(frozen=True)
class NestedCall:
    """Beyond the C++: a JSON call object that nests the function's name and its arguments under one member,
    beside members the template writes the same in every call (OpenAI's own shape, `{"id": ..., "type":
    "function", "function": {"name": ..., "arguments": ...}}`, which a template writes with `tool_calls | tojson`).
    The C++ takes that member for the arguments (`args_field`), so its parser and grammar want the arguments
    where the template writes the name and the arguments."""

    member: str
    """The member that holds the name and the arguments (`function`)."""
    name_key: str
    args_key: str
    constants: tuple[tuple[str, str], ...] = ()
    """The members written the same in every call before `member` (`("type", '"function"')`): key and JSON text."""

    def to_dict(self) -> dict[str, Any]:
        return {"member": self.member, "name_key": self.name_key, "args_key": self.args_key,
                "constants": [list(c) for c in self.constants]}


@dataclass(frozen=True)
class CallForm:
    """A tool-call form derived beyond the C++ analysis: the calls' syntax and what the template writes around
    them (no C++ counterpart: `TemplateAnalysis.to_dict()` leaves it out, so records still compare)."""

    syntax: CallSyntax
    section_start: str = ""
    """Text before the calls (`<|tool_call_start|>`, `<function_calls>`), or nothing: the calls stand bare."""
    section_end: str = ""
    list_wrapped: bool = False
    """The calls are a list: `[call, call]`."""
    separator: str = ", "
    """What the template writes between two calls."""
    strings: StringValues = StringValues.LITERAL
    """How a string value is written (a value the template prints as it is ends where the next argument or the
    call's end begins)."""
    quote: str = '"'
    """The quote around an UNESCAPED string value."""
    quoted_values: bool = False
    """UNESCAPED: every value is printed between the quotes, numbers too (`days="3"`: `'"%s"' | format(v)`)."""

    def to_dict(self) -> dict[str, Any]:
        out = {"syntax": self.syntax.value, "section_start": self.section_start, "section_end": self.section_end,
               "list_wrapped": self.list_wrapped, "separator": self.separator}
        if self.strings is not StringValues.LITERAL:  # (records of the forms read before stay as they were)
            out["strings"] = self.strings.value
            if self.strings is StringValues.UNESCAPED:
                out["quote"] = self.quote
                out["quoted_values"] = self.quoted_values
        return out


@dataclass(frozen=True)
class TemplateAnalysis:
    caps: TemplateCaps = field(default_factory=TemplateCaps)
    analysis_complete: bool = True
    user_start: str = ""
    assistant_start: str = ""
    reasoning: ReasoningAnalysis = field(default_factory=ReasoningAnalysis)
    content: ContentAnalysis = field(default_factory=ContentAnalysis)
    tools: ToolsAnalysis = field(default_factory=ToolsAnalysis)
    preserved_tokens: tuple[str, ...] = ()
    additional_stops: tuple[str, ...] = ()
    call_form: CallForm | None = None
    """A call form the C++ cannot describe, derived where the template renders one (not in `to_dict()`)."""
    string_arguments: bool = False
    """The tool phase rendered call arguments as JSON strings: with objects (as the C++ renders them) the
    template's call was not valid JSON, and the C++ gives up (not in `to_dict()`)."""
    argument_separator: str = ""
    """Beyond the C++: the text between two tagged arguments (`arguments.separator`), which llama.cpp's parser
    does not read; set only in a transformers reading, where the generic path then joins arguments with it
    (not in `to_dict()`)."""
    call_separator: str | None = None
    """Beyond the C++: what the template writes between two calls in one section that no per-call marker wraps,
    where it is not the `, ` llama.cpp's parser and grammar put there (analysis/tools.py `call_separator`:
    nothing between DSML invokes, a newline between JSON calls one per line); the parser and grammar take it
    from here (not in `to_dict()`)."""
    arguments_sorted: bool = False
    """Beyond the C++: the template writes a call's tagged arguments sorted by name, whatever order the call gives
    them (analysis/tools.py `arguments_sorted`); the parser and grammar want the required ones in that order, not
    the schema's (not in `to_dict()`)."""
    typed_argument: TypedArgument | None = None
    """Beyond the C++: how the template writes a tagged argument that is no string, where it differs from a
    string's markers (analysis/tools.py `typed_argument`); the parser and grammar read such a value so (not in
    `to_dict()`)."""
    call_id_in_name_prefix: tuple[str, str] | None = None
    """Beyond the C++: the record's function name prefix holds the call's id, where the C++ found no id (Solar
    Open writes `<|tool_call:begin|>ID<|tool_call:name|>NAME`, and the tools the system prompt lists hide the id's
    place from the C++'s diff): what the prefix has before the id and after it (analysis/tools.py
    `call_id_in_name_prefix`). The parser reads any id there, the grammar lets the model write one (not in
    `to_dict()`)."""
    instructed_opener: tuple[str, str] | None = None
    """Beyond the C++: (a call's opener as the template's calls render it, as its tool instructions spell it),
    where they differ (analysis/tools.py `instructed_opener`: Step3 renders `<｜tool_call_begin>` before
    `｜>\nfunction...`, its instructions and its vocabulary `<｜tool_call_begin｜>`). The relaxed parser reads the
    instructed spelling too, as a repair (not in `to_dict()`)."""
    nested_call: NestedCall | None = None
    """Beyond the C++: the JSON call object nests the name and the arguments under one member (analysis/tools.py
    `nested_call`); the parser and grammar read the object so (not in `to_dict()`)."""
    section_start_in_prompt: bool = False
    """Beyond the C++: the generation prompt ends with the call section's opener (`tools.format.section_start`),
    so the model writes its calls without one (analysis/tools.py `section_start_in_prompt`); the parser and
    grammar read the calls as written after the prompt (not in `to_dict()`)."""
    prompt_reasoning: ReasoningAnalysis | None = None
    """Beyond the C++: a reasoning block the generation prompt opens (its opening tag, as the prompt writes it,
    and the tag's closing form) where the analysis found no end to one (analysis/reasoning.py
    `prompt_opened_reasoning`). The relaxed parser reads it, where the generation prompt still opens it
    (not in `to_dict()`)."""
    typed_reasoning: ReasoningAnalysis | None = None
    """Beyond the C++: the reasoning block the template writes only from an assistant content's typed blocks
    (Apertus's `thoughts`, a `thinking` chunk), where it ignores `reasoning_content` and the analysis finds none
    (analysis/reasoning.py `typed_block_reasoning`). The relaxed parser reads it (not in `to_dict()`)."""
    transformers_reading: TemplateAnalysis | None = None
    """Beyond the C++: the template analysed as transformers renders a request (caps probed that way too, the
    arguments as their JSON text), where llama.cpp renders no conversation of it, no call, or calls its tag
    reading takes apart wrongly, and this reading finds calls (analysis/analyzer.py, template/cpp.py
    `transformers_reading`). The record (`to_dict()`) stays the C++'s; parsers are made from `effective`."""

    @property
    def output_reasoning(self) -> ReasoningAnalysis:
        """The reasoning block the template's output holds: this analysis's, or, where the analysis finds no end,
        the one the generation prompt opens (`prompt_reasoning`: OLMo 3 Think's `<think>`) or the one the template
        writes only from typed content (`typed_reasoning`: Apertus's). The exports read those like any other."""
        if not self.reasoning.end.strip(C_SPACE):
            beyond = self.prompt_reasoning or self.typed_reasoning
            if beyond is not None:
                return beyond
        return self.reasoning

    @property
    def effective(self) -> TemplateAnalysis:
        """The analysis a parser is made from: the transformers reading where there is one, else this one."""
        return self.transformers_reading or self

    def beyond_cpp(self) -> dict[str, Any]:
        """What the analysis found that the C++ record has no field for, under one key (empty when nothing):
        `analyze --json` and the snapshots print it after the C++ record."""
        extra: dict[str, Any] = {}
        if self.call_form is not None:
            extra["call_form"] = self.call_form.to_dict()
        if self.string_arguments:
            extra["string_arguments"] = True
        if self.tool_calls_described_only:
            extra["tool_calls"] = "described_only"
        if self.call_separator is not None:
            extra["call_separator"] = self.call_separator
        if self.arguments_sorted:
            extra["arguments_sorted"] = True
        if self.typed_argument is not None:
            extra["typed_argument"] = self.typed_argument.to_dict()
        if self.call_id_in_name_prefix is not None:
            extra["call_id_in_name_prefix"] = list(self.call_id_in_name_prefix)
        if self.instructed_opener is not None:
            extra["instructed_opener"] = list(self.instructed_opener)
        if self.nested_call is not None:
            extra["nested_call"] = self.nested_call.to_dict()
        if self.section_start_in_prompt:
            extra["section_start_in_prompt"] = True
        if self.prompt_reasoning is not None:
            extra["prompt_reasoning"] = {"start": self.prompt_reasoning.start, "end": self.prompt_reasoning.end}
        if self.typed_reasoning is not None:
            extra["typed_reasoning"] = {"start": self.typed_reasoning.start, "end": self.typed_reasoning.end}
        reading = self.transformers_reading
        if reading is not None:
            extra["transformers_reading"] = {**reading.to_dict(), **reading.beyond_cpp()}
        return {"beyond_cpp": extra} if extra else {}

    @property
    def tool_calls_described_only(self) -> bool:
        """The prompt shows the request's tools (the template tells the model about them, and often how to call
        them), but no rendering of an assistant message shows a call: there is no call format to derive, and
        a parse reads calls as content. Distinct from a template that knows no tools at all."""
        return self.caps.supports_tools and not self.caps.supports_tool_calls

    def to_dict(self) -> dict[str, Any]:
        """Same keys, order and value types as a C++ analysis record (minus its "template" name)."""
        return {
            "caps": dict(sorted(self.caps.to_dict().items())),
            "analysis_complete": self.analysis_complete,
            "user_start": self.user_start,
            "assistant_start": self.assistant_start,
            "reasoning": self.reasoning.to_dict(),
            "content": self.content.to_dict(),
            "tools": self.tools.to_dict(),
            "preserved_tokens": list(self.preserved_tokens),
            "additional_stops": list(self.additional_stops),
        }
