"""The recovery plan of one request: the relaxed parser, and what one pass over it tells the recovery.

The relaxed builder (recovery/relax.py) leaves everything the recovery needs in the parser it builds: each
reading beyond the template is a `repair:<kind>` node, the texts the relaxed parser reads as markup where
llama.cpp's reads text are tagged `relaxed-markup`, and where calls without any marker begin is a
`call-start` node. `plan_of` reads them back in one pass, as it reads the closers a truncated output may lack:
nothing is accumulated on the builder while it builds.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from autoparser.chat.tags import TOOL, TOOL_ARG_CLOSE, TOOL_ARG_STRING_VALUE, TOOL_CLOSE
from autoparser.chat.tools import Function
from autoparser.peg import Arena
from autoparser.peg import nodes as N
from autoparser.peg.nodes import C_SPACE
from autoparser.types import ChatMessage

__all__ = ["CALL_START", "DROPPED_BLOCK", "END_SPACE", "HEADER", "LOOKAHEAD_ONLY", "RELAXED_MARKUP", "REPAIR", "SPACED_MARKUP",
           "TYPED_BLOCK", "RecoveryPlan", "plan_of"]

# Tag prefix of the readings beyond the template (`repair:<kind>`): the default parse reports each node of one
# as a diagnostic (recovery/checks.py).
REPAIR = "repair:"
# Tag of texts the relaxed parser reads as markup where llama.cpp's reads text (calls written without their
# opener): where the strict message holds one, the relaxed parser may read the output otherwise.
RELAXED_MARKUP = "relaxed-markup"
# Tag of such texts made of pieces that whitespace may separate (`[`, `{`, `"name"` of a pretty-printed call array
# written without its opener): the strict message's text holds them where it matches their pattern.
SPACED_MARKUP = "relaxed-markup-spaced"
# Tag of where calls without any marker begin (`{"name"`): after text it cannot read, the reading resumes there.
CALL_START = "call-start"
# Tag of a block llama.cpp's parser reads and drops (its start and end markers): where an output writes one with
# text in it, the strict reading loses that text and does not stand.
DROPPED_BLOCK = "dropped-block"
# Tag of the reasoning block (its start and end markers) a template writes only from typed content, which only the
# relaxed parser reads: the plan's reasoning block, where the format has none.
TYPED_BLOCK = "typed-reasoning-block"
# Tag of texts a lookahead of the relaxed parser checks for that close nothing (`days</arg_key>`, the next
# argument's name after a value's closer): never a closer the completion may append, which would invent a key.
LOOKAHEAD_ONLY = "lookahead-only"
# Tag of a message header's marker (` to=user<|message|>`, `<|channel|>final<|message|>`), read as an atomic whole:
# one the output's end cuts off opens no message, and its text is content (`holes_in`), not markup.
HEADER = "message-header"
# Tag of the whitespace the relaxed parser reads before the end of the output (or before a further call section,
# where the output may as well end): formatting where the output ends there, the start of the text that follows
# where it does not (a prefix that ends in it only seems to end).
END_SPACE = "end-space"

# Repairs whose markers count only at the start of the content (reasoning markers).
_LEAD_REPAIRS = (REPAIR + "undeclared_reasoning", REPAIR + "typed_reasoning", REPAIR + "stray_reasoning_end",
                 REPAIR + "repeated_opener")

_NOT_WS = re.compile(f"[^{C_SPACE}]")


def lead_end(text: str) -> int:
    """Where the leading whitespace of `text` ends (without copying the text)."""
    m = _NOT_WS.search(text)
    return m.start() if m else len(text)


@dataclass(frozen=True)
class RecoveryPlan:
    """What the default parse of one request needs beside the strict parser."""

    relaxed: Arena
    """The relaxed parser: the format's build on the relaxed builder (the strict parser for a format that
    does not relax)."""
    reasoning_start: str = ""
    """The reasoning start marker, dropped at the start of reasoning when the model repeats it."""
    reasoning_end: str = ""
    """The reasoning end marker (of the format's reasoning block, whether or not the request asks for reasoning):
    a block the content holds is reasoning (`Reader.with_late_reasoning`)."""
    reasoning_requested: bool = False
    """The request asks for reasoning: where a complete output writes the end marker with no reasoning open, the
    text before it was reasoning (the start left out)."""
    tools: tuple[Function, ...] = ()
    """The request's tools, which a recovered call's arguments are checked against."""
    triggers: tuple[str, ...] = ()
    """Texts the relaxed parser reads as markup where the strict one reads text."""
    lead_triggers: tuple[str, ...] = ()
    """The same, read as markup only at the start of the content (reasoning markers)."""
    prompt_reasoning: bool = False
    """The prompt leaves a reasoning block open that only the relaxed parser reads: every output may be
    reasoning the strict message shows as content."""
    dropped_blocks: tuple[tuple[str, str], ...] = ()
    """The blocks (start, end) llama.cpp's parser reads and drops (`DROPPED_BLOCK`)."""
    headers: tuple[str, ...] = ()
    """Message headers' markers (`to=user<|message|>`, `<|channel|>final<|message|>`: `HEADER`): they open a message,
    as a call's marker opens a call; one the output's end cuts off opens nothing (`Reader._cut_markers`)."""
    call_markers: tuple[str, ...] = ()
    """The texts calls begin with (the format's trigger words, and where calls have no marker, how the
    template begins one): after a call it cannot read, the reading resumes at the next one."""
    closers: frozenset[str] = frozenset()
    """The texts that only close something (`closers`): what a truncated output may be completed with."""
    call_closers: frozenset[str] = frozenset()
    """Those of them that end a call or a call section (`call_closers`): a value a completion closes never
    runs over them (where the output writes them, the value's own closer was left out, not cut off)."""
    turn_end: tuple[str, ...] = ()
    """The special tokens the template writes after an assistant message's text (its end-of-turn suffix): an
    output that ends with them where a server did not stop on them ends its text there."""
    triggered_by: re.Pattern[str] | None = field(default=None, repr=False, compare=False)
    triggered_within: re.Pattern[str] | None = field(default=None, repr=False, compare=False)
    """The spaced triggers (`SPACED_MARKUP`), as one pattern searched anywhere in the text."""

    def drops_text(self, output: str) -> bool:
        """Whether `output` writes a block llama.cpp's parser drops with text in it (up to its end, or to the
        end of the output)."""
        for start, end in self.dropped_blocks:
            at = output.find(start)
            while at >= 0:
                body = at + len(start)
                stop = output.find(end, body)
                if _NOT_WS.search(output, body, stop if stop >= 0 else len(output)):
                    return True
                at = output.find(start, body)
        return False

    def triggered(self, msg: ChatMessage) -> bool:
        """Whether the strict message's text holds a trigger, where the relaxed parser may read otherwise (in
        its content, its reasoning or a call's arguments: a tagged value)."""
        content, reasoning = msg.content, msg.reasoning_content
        if self.prompt_reasoning and content:
            return True
        for t in self.triggers:  # (a loop, not any(): this runs on every accepted parse)
            if t in content or t in reasoning:
                return True
            for call in msg.tool_calls:
                if t in call.arguments:
                    return True
        within = self.triggered_within
        if within is not None and (within.search(content) or within.search(reasoning)
                                   or any(within.search(call.arguments) for call in msg.tool_calls)):
            return True
        lead = self.triggered_by
        return lead is not None and lead.match(content, lead_end(content)) is not None


def plan_of(relaxed: Arena, *, reasoning_start: str = "", reasoning_end: str = "", reasoning_requested: bool = False,
            tools: tuple[Function, ...] = (), call_markers: tuple[str, ...] = (),
            turn_end: tuple[str, ...] = ()) -> RecoveryPlan:
    """The plan of a request from its relaxed parser (one pass over its nodes), the format's reasoning markers,
    whether the request asks for reasoning, the request's tools, the format's call markers (its trigger words)
    and the template's end-of-turn tokens."""
    triggers: list[str] = []
    lead: list[str] = []
    starts: list[str] = []
    dropped: list[tuple[str, str]] = []
    spaced: list[str] = []
    headers: list[str] = []
    prompt_reasoning = False
    for node in relaxed.parsers:
        if not isinstance(node, N.Tag):
            continue
        tag = node.tag
        if tag == REPAIR + "prompt_reasoning":
            prompt_reasoning = True
        elif tag in _LEAD_REPAIRS:
            lead.extend(_literals(relaxed, node.child))
        elif tag in (RELAXED_MARKUP, REPAIR + "call_opener_spelling"):
            triggers.extend(_literals(relaxed, node.child))
        elif tag == SPACED_MARKUP:
            spaced.append(f"[{re.escape(C_SPACE)}]*".join(map(re.escape, _literals(relaxed, node.child))))
        elif tag == CALL_START:
            starts.extend(_literals(relaxed, node.child))
        elif tag == HEADER:
            headers.append("".join(_literals(relaxed, node.child)))
        elif tag == DROPPED_BLOCK:
            start, end = _literals(relaxed, node.child)
            dropped.append((start, end))
        elif tag == TYPED_BLOCK and not (reasoning_start or reasoning_end):
            reasoning_start, reasoning_end = (m.strip(C_SPACE) for m in _literals(relaxed, node.child))
    lead_triggers = tuple(dict.fromkeys(t for t in lead if t.strip(C_SPACE)))
    return RecoveryPlan(
        relaxed, reasoning_start=reasoning_start, reasoning_end=reasoning_end,
        reasoning_requested=reasoning_requested, tools=tools, triggers=tuple(dict.fromkeys(triggers)),
        lead_triggers=lead_triggers, prompt_reasoning=prompt_reasoning,
        headers=tuple(dict.fromkeys(headers)), call_markers=tuple(dict.fromkeys((*call_markers, *starts))),
        dropped_blocks=tuple(dict.fromkeys(dropped)),
        closers=closers(relaxed), call_closers=call_closers(relaxed), turn_end=turn_end,
        triggered_by=re.compile("|".join(map(re.escape, lead_triggers))) if lead_triggers else None,
        triggered_within=re.compile("|".join(dict.fromkeys(spaced))) if spaced else None)


# What a closer left out is read by (`block_closer`, `tagged_call_close`): no closer.
_MISSING_CALL_CLOSER = REPAIR + "missing_call_closer"


def _literals(arena: Arena, pid: int, depth: int = 0) -> Iterator[str]:
    """The literal texts under a node (its delimiters for a scan), but those a closer left out is read by (what
    follows it: the next call's opener) and those only a lookahead checks for (`LOOKAHEAD_ONLY`)."""
    node = arena.parsers[pid]
    if depth > 12 or (isinstance(node, N.Tag) and node.tag in (_MISSING_CALL_CLOSER, LOOKAHEAD_ONLY)):
        return
    if isinstance(node, N.Literal):
        yield node.literal
    elif isinstance(node, N.Until):
        yield from node.delimiters
    for child in N.child_ids(node):
        yield from _literals(arena, child, depth + 1)


@functools.lru_cache(maxsize=256)
def closers(arena: Arena) -> frozenset[str]:
    """The texts that only close something in this format: literals under tool-close and argument-close tags,
    the delimiters of string argument values. Supplying them never invents a name, a key or content."""
    values, calls = _closers(arena)
    return values | calls


@functools.lru_cache(maxsize=256)
def call_closers(arena: Arena) -> frozenset[str]:
    """The closers (`closers`) that end a call or a call section (`</invoke>`, `</tool_call>`), not a value."""
    return _closers(arena)[1]


def _closers(arena: Arena) -> tuple[frozenset[str], frozenset[str]]:
    """The closers of values (and string delimiters), and those of calls and call sections."""
    out: set[str] = set()
    calls: set[str] = set()
    parsers = arena.parsers

    def holds_call(pid: int, depth: int = 0) -> bool:
        node = parsers[pid]
        if isinstance(node, N.Tag) and node.tag == TOOL:
            return True
        # (a repetition: the further calls one wrapper holds, `grouped_calls`)
        if depth > 3 or not isinstance(node, (N.Choice, N.Rule, N.Tag, N.Sequence, N.Repetition)):
            return False
        return any(holds_call(c, depth + 1) for c in N.child_ids(node))

    def closer_at(pid: int) -> str:
        node = parsers[pid]
        if isinstance(node, N.Choice) and node.children and all(
                isinstance(alt := parsers[c], N.Tag) and alt.tag == _MISSING_CALL_CLOSER for c in node.children[1:]):
            node = parsers[node.children[0]]  # (a closer also read left out: `block_closer`)
        return node.literal if isinstance(node, N.Literal) and node.literal.strip(C_SPACE) else ""

    for node in parsers:
        if isinstance(node, N.Tag) and node.tag in (TOOL_CLOSE, TOOL_ARG_CLOSE, TOOL_ARG_STRING_VALUE):
            (calls if node.tag == TOOL_CLOSE else out).update(s for s in _literals(arena, node.child)
                                                              if s.strip(C_SPACE))
        elif isinstance(node, N.Sequence):
            # the literal right after a call (`</tool_call>` after `<function=...>...</function>`; whitespace
            # between, where the relaxed parser reads it: `space_then`)
            children = [c for c in node.children if not isinstance(parsers[c], N.Space)]
            for before, after in itertools.pairwise(children):
                if (lit := closer_at(after)) and holds_call(before):
                    calls.add(lit)
        elif isinstance(node, N.Rule) and node.trigger:
            # a call section's own closer: the last literal of its body
            body = parsers[node.child]
            if isinstance(body, N.Sequence) and body.children and (last := closer_at(body.children[-1])):
                calls.add(last)
    return frozenset(out), frozenset(calls)
