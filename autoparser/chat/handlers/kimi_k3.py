"""Kimi K3 (`common_chat_params_init_kimi_k3`, parsers/kimi-k3.cpp).

XTML sections: `<|open|>TAG attrs<|sep|> ... <|close|>TAG<|sep|>`. An assistant message is an optional think
section, an optional response section, an optional tools section of calls with one section per argument, then
the message closer and `<|end_of_msg|>`. Tag names are ordinary words, so only the markers are preserved. Why
a handler: every section is delimited by the same two markers, told apart only by the word after them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial

from autoparser.chat.constraint import (
    Alt,
    CallTags,
    Json,
    Lit,
    Many,
    Opt,
    Pattern,
    Piece,
    Seq,
    Tag,
    Text,
    by_kind,
    value_schema,
)
from autoparser.chat.spec import Build, FormatSpec, Laziness, Prefill, SchemaRule, word
from autoparser.chat.tools import Function, functions, parameters
from autoparser.peg.builder import P

SEP = "<|sep|>"
MSG_START = '<|open|>message role="assistant"<|sep|>'
THINK_START = "<|open|>think<|sep|>"
THINK_END = "<|close|>think<|sep|>"
RESP_START = "<|open|>response<|sep|>"
RESP_END = "<|close|>response<|sep|>"
TOOLS_START = "<|open|>tools<|sep|>"
TOOLS_END = "<|close|>tools<|sep|>"
CALL_START = '<|open|>call tool="'
JSON_START = '<|open|>json type="object"<|sep|>'
JSON_END = "<|close|>json<|sep|>"
CALL_END = "<|close|>call<|sep|>"
ARG_START = '<|open|>argument key="'
ARG_END = "<|close|>argument<|sep|>"
MSG_END = "<|close|>message<|sep|>"
EOM_TOKEN = "<|end_of_msg|>"
TOOLS_RULE = "kimi-k3-tool-call"


def _escape_attr(value: str) -> str:
    """An attribute's value as the template's `escape_attr` macro writes it."""
    return value.replace("&", "&amp;").replace('"', "&quot;")


def detect(source: str) -> FormatSpec | None:
    return SPEC if "<|open|>" in source and "<|close|>" in source and "<|end_of_msg|>" in source else None


def _build(b: Build) -> P:
    p = b.p
    end = p.end()
    start = p.optional(p.literal(MSG_START))

    bare = list(dict.fromkeys(f'{CALL_START}{n}"' for f in functions(b.inputs.tools)
                              for n in (f.name, _escape_attr(f.name)))) if b.tool_calls else []

    # The generation prompt opens the think section, so it is consumed even when reasoning is not extracted;
    # a model that skips the closer ends its reasoning at the response opener (relaxed: or at its calls, the
    # tools section or a call written without it; without tools too, the call then being text)
    call_starts = [TOOLS_START, *bare]
    think_until = p.until_one_of([THINK_END, RESP_START, *p.bare_call_starts(call_starts)])
    think_body = p.reasoning(think_until) if b.extract_reasoning else p.content(think_until)
    reasoning = p.optional(p.optional(p.literal(THINK_START)) + think_body
                           + p.reasoning_ended_by_call(p.optional(p.literal(THINK_END)), call_starts,
                                                       draft_until=THINK_END if b.extract_reasoning else ""))

    # a truncated response runs to whichever section comes next (relaxed: or to where a call written without
    # the tools section's opener begins, `<|open|>call tool="NAME"`)
    # (operands in the C++ evaluation order, see cpp_sum, so that automaton rule ids match)
    p.calls_begin_at(bare)  # (after a call it cannot read, reading resumes at the next)
    # (relaxed: the response opener written again where the prompt opened the response, thinking off)
    response = p.cpp_sum(lambda: p.opener_again(p.optional(p.literal(RESP_START)), RESP_START),
                         lambda: p.content_until_calls([RESP_END, TOOLS_START, MSG_END], bare,
                                                       lambda: p.ref(TOOLS_RULE)),
                         lambda: p.optional(p.literal(RESP_END)))

    # the end-of-message token reaches the parser as text and must be consumed
    trailer = p.optional(p.literal(MSG_END)) + p.optional(p.literal(EOM_TOKEN))

    if not b.tool_calls:
        return start + reasoning + response + trailer + end

    def undeclared_arg() -> P:
        # (relaxed: an argument the schema does not list; its type attribute says whether the value is a string,
        # the template writing `type="string"` for one, else JSON where it reads as JSON, else its text)
        key = p.tool_arg_name(p.until('"'))
        opener = p.tool_arg_open(p.space_then(p.literal(ARG_START)) + key + p.literal('"'))
        close = p.tool_arg_close(p.literal(ARG_END))
        string = p.literal(' type="string"') + p.until(SEP) + p.literal(SEP) \
            + p.tool_arg_string_value(p.until(ARG_END))
        typed = p.until(SEP) + p.literal(SEP) + p.value_or_text(
            p.tool_arg_value(p.until(ARG_END)), lambda: p.tool_arg_string_value(p.until(ARG_END)),
            lambda: p.tool_arg_json_value(p.json()) + p.peek(p.literal(ARG_END)))
        return p.tool_arg(opener + p.choice([string, typed]) + close)

    def call_of(tool_name: Callable[[], P], args: P) -> P:
        # (the index="N" attribute of the call, operands right to left: automaton rule ids match the C++'s)
        call_close = p.tool_close(p.space_then(p.literal(CALL_END)))
        # (relaxed: the arguments as the JSON block the template writes for arguments given as a string)
        call_args = p.tagged_arguments(p.tool_args(args), JSON_START, JSON_END)
        sep = p.literal(SEP)
        attrs = p.until(SEP)
        quote = p.literal('"')
        call_open = p.tool_open(p.space_then(p.literal(CALL_START)) + tool_name() + quote + attrs + sep)
        return p.tool(call_open + call_args + call_close)

    tool_choices = p.choice()
    for f in functions(b.inputs.tools):
        name, schema = f.name, f.schema
        # Each argument section carries a type="..." attribute; the schema decides instead whether the value is
        # JSON or a literal string.
        args = p.eps()
        props = schema.get("properties") if isinstance(schema, Mapping) else None
        extra = p.undeclared_arg(undeclared_arg, schema)
        if props or extra:
            arg_choices = p.choice()
            for key, prop in (props.items() if isinstance(props, Mapping) else ()):
                kind = prop.get("type") if isinstance(prop, Mapping) else None
                kind = kind if isinstance(kind, str) else "string"
                # (relaxed: a value that is no JSON, `three` for an integer, is its text: the C++'s mapper writes
                # the text into the arguments as it is, which then are no JSON)
                value = p.tool_arg_string_value(p.until(ARG_END)) if kind == "string" \
                    else p.value_or_text(p.tool_arg_value(p.until(ARG_END)),
                                         lambda: p.tool_arg_string_value(p.until(ARG_END)),
                                         lambda: p.tool_arg_json_value(p.json()) + p.peek(p.literal(ARG_END)))
                # The attributes after the key are skipped up to <|sep|>. Operands are created right to left, as
                # the C++ compiler evaluates `a + b + ...`, so that automaton rule ids match its grammar.
                close = p.tool_arg_close(p.literal(ARG_END))
                sep = p.literal(SEP)
                attrs = p.until(SEP)
                quote = p.literal('"')
                arg_name = p.tool_arg_name(p.literal(key))
                # (relaxed, space_then: whitespace before each argument and the call's closer, the template
                # writing none)
                opener = p.tool_arg_open(p.space_then(p.literal(ARG_START)))
                arg_choices |= p.rule(f"kimi-k3-arg-{name}-{key}",
                                      p.tool_arg(opener + arg_name + quote + attrs + sep + value + close))
            for arg in extra:
                arg_choices |= arg
            args = p.zero_or_more(arg_choices)
        tool_choices |= p.rule(f"kimi-k3-tool-{name}", call_of(partial(p.escaped_name, name, _escape_attr(name)),
                                                              args))
    # (relaxed: a call to a tool the request does not declare, its name bounded by the attribute's quote and
    # escaped as the template escapes an attribute)
    for call in p.undeclared_call(lambda tool_name: call_of(lambda: tool_name, p.zero_or_more(undeclared_arg())),
                                  escaped_until='"'):
        tool_choices |= call

    # The message closer belongs to the trigger rule: a lazy grammar that has started on the calls must accept it.
    # (relaxed: the section opener may be left out; whitespace before the section's markers and the message's
    # closer after them, space_then)
    tools_section = p.trigger_rule(TOOLS_RULE, p.space_then(p.call_opener(TOOLS_START)) + p.one_or_more(tool_choices)
                                   + p.space_then(p.literal(TOOLS_END)) + p.optional(p.space_then(p.literal(MSG_END)))
                                   + p.optional(p.literal(EOM_TOKEN)))
    calls = tools_section if b.required else p.optional(tools_section)
    return start + reasoning + response + calls + trailer + end


def _call_tags(fns: Sequence[Function], parallel: bool) -> CallTags:
    """For the structural tag and Lark exports: the tools section of calls `<|open|>call tool="NAME" index="N"<|sep|>`,
    one `<|open|>argument key="K" type="T"<|sep|>V<|close|>argument<|sep|>` per argument in any order (a string raw
    up to the closer, `type="string"`, any other value JSON under its schema, its type the template's word for it),
    as the template writes them. What the template writes after the section (`<|close|>message<|sep|>`) hands the
    turn over; where the output is calls, the empty response section it writes first may lead them."""
    invokes: list[Piece] = []
    for f in fns:
        args: list[Piece] = []
        for param in parameters(f):
            key = f'{ARG_START}{_escape_attr(param.name)}" type="'
            args.append(by_kind(param, Tag(key + 'string"' + SEP, Text(), ARG_END),
                                Seq((Lit(key), Pattern("boolean|null|number|object|array"), Lit('"' + SEP),
                                     Json(value_schema(param)), Lit(ARG_END)))))
        listed: Piece = Opt(Many(Alt(tuple(args)))) if args else Seq(())
        invokes.append(Seq((Lit(_escape_attr(f.name) + '"'), Pattern(' index="[0-9]+"'), Lit(SEP), listed)))
    one = Tag(CALL_START, Alt(tuple(invokes)), CALL_END)
    calls = Seq((one, Opt(Many(one)))) if parallel else one
    return CallTags(TOOLS_START, (Tag(TOOLS_START, calls, TOOLS_END),), (CALL_END, TOOLS_END),
                    hand_over=(MSG_END + EOM_TOKEN, MSG_END), lead=(RESP_START + RESP_END,))


SPEC = FormatSpec(
    "kimi_k3", _build, Prefill(MSG_START, THINK_START, THINK_END + RESP_START), laziness=Laziness.TOOLS_AUTO,
    response_format=SchemaRule.IGNORED, triggers=(word(TOOLS_START),), relaxes=True,
    # tag names ("think", "response", ...) are plain words: preserving them would break prose using them
    preserved_tokens=("<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>"),
    supports_thinking=True, thinking_start_tag=THINK_START, thinking_end_tags=(THINK_END,), call_tags=_call_tags,
    # system and tool openers carry more attributes, so their delimiters stop after the role's quote
    message_delimiters=(("assistant", MSG_START), ("user", '<|open|>message role="user"<|sep|>'),
                        ("tool", '<|open|>message role="tool"'), ("system", '<|open|>message role="system"')))
