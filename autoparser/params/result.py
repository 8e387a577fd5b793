"""What one request gives (`common_chat_params`): the prompt to feed, how to constrain the output and how to
read it, whole (`parse`) or streamed (`stream`)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from autoparser.chat.mapper import output_parser, peg_parse
from autoparser.chat.spec import GrammarTrigger
from autoparser.chat.stream import StreamParser
from autoparser.errors import ParseError
from autoparser.peg.arena import Arena
from autoparser.peg.engine import OBS_LITERAL
from autoparser.peg.nodes import Literal
from autoparser.peg.serialize import save
from autoparser.peg.utf8 import to_text
from autoparser.recovery import Reader, RecoveringStream, RecoveryPlan, plan_of, viable_prefix
from autoparser.types import ChatFormat, ChatMessage

__all__ = ["ChatParams"]


@dataclass(frozen=True)
class ChatParams:
    """Everything a server needs for one request: the prompt to feed, how to constrain and how to parse."""

    format: ChatFormat = ChatFormat.CONTENT_ONLY
    prompt: str = ""
    generation_prompt: str = ""
    parser: Arena | None = None
    grammar: str = ""
    grammar_lazy: bool = False
    grammar_triggers: tuple[GrammarTrigger, ...] = ()
    preserved_tokens: tuple[str, ...] = ()
    additional_stops: tuple[str, ...] = ()
    supports_thinking: bool = False
    thinking_start_tag: str = ""
    thinking_end_tags: tuple[str, ...] = ()
    message_delimiters: tuple[tuple[str, str], ...] = ()
    messages: tuple[Mapping[str, Any], ...] = field(default=(), repr=False)  # as rendered (for reconstruction)
    tools: tuple[Mapping[str, Any], ...] = field(default=(), repr=False)
    handler: str = "autoparser"
    recovery: RecoveryPlan | None = field(default=None, repr=False, compare=False)
    """What the default parse reads with beside `parser` (recovery/plan.py); None: the strict parser alone."""
    # The variables the prompt was rendered with: llama.cpp's (`common_chat_template_direct_apply`), or, for a
    # request the template fails in those, the ones transformers passes (chat/spec.py `render`). Not in the C++.
    template_context: str = "llama.cpp"

    @property
    def parser_json(self) -> str:
        """The parser serialised like the C++ `common_chat_params::parser`."""
        return save(self.parser) if self.parser is not None else ""

    def parse(self, text: str | bytes, *, is_partial: bool = False, strict: bool = False) -> ChatMessage:
        """Parse model output (the generation prompt is prepended internally); `is_partial` (llama.cpp's name):
        the output may continue.

        By default a malformed output is recovered (autoparser/recovery): the message says in `diagnostics`
        what was repaired, a complete output never raises, and no text of it is lost. `strict=True` is
        llama.cpp's parse: the same message for a well-formed output, ParseError for one it rejects.
        """
        if strict:
            try:
                return peg_parse(self.parser, text, is_partial=is_partial, generation_prompt=self.generation_prompt,
                                 format=self.format)
            except ParseError as e:
                raise self._rejection(to_text(text), e) from None
        return self.reader.read(to_text(text), partial=is_partial)

    def stream(self, *, gen_tool_call_id: Callable[[], str] | None = None, strict: bool = False) -> StreamParser:
        """An incremental parser for this request's output, fed chunk by chunk (see chat/stream.py); its final
        message is `parse(output)`'s (with `strict`, the strict parse's)."""
        if strict:
            return StreamParser(self.parser, generation_prompt=self.generation_prompt, format=self.format,
                                gen_tool_call_id=gen_tool_call_id)
        return RecoveringStream(self.reader, gen_tool_call_id=gen_tool_call_id)

    @functools.cached_property
    def reader(self) -> Reader:
        """The default parse of this request's outputs (recovery/reading.py)."""
        strict = output_parser(self.parser)
        return Reader(strict, self.recovery or plan_of(strict), self.generation_prompt, self.format)

    def _rejection(self, output: str, error: ParseError) -> ParseError:
        """llama.cpp's rejection of an output (its parse fails where the first choice does, often at 0), said
        where the output stops matching: the end of the longest prefix the parser can still continue, and
        the markers it waits for there."""
        if self.parser is None or "does not match" not in error.reason:
            return error  # (the nesting guard's error says where already)
        effective, offset = self.generation_prompt + output, len(self.generation_prompt)
        cut = viable_prefix(self.parser, effective, offset)
        try:
            waiting = self.parser.parse(effective[:cut], partial=True)
        except ParseError:
            return error
        expected = list(dict.fromkeys(
            lit.literal for kind, pid, pos in waiting.observed if kind == OBS_LITERAL and pos <= cut
            for lit in (self.parser.get(pid),) if isinstance(lit, Literal) and lit.literal.strip()
            and lit.literal.startswith(effective[pos:cut])))
        return ParseError("the output does not match the format this template's model writes", text=output,
                          position=cut - offset, expected=" or ".join(json.dumps(e, ensure_ascii=False)
                                                                     for e in expected[:4]))

    def to_dict(self) -> dict[str, Any]:
        """The fields the C++ test data records under `cpp` (for comparison and snapshots)."""
        return {
            "format": self.format.value,
            "prompt": self.prompt,
            "generation_prompt": self.generation_prompt,
            "grammar": self.grammar,
            "grammar_lazy": self.grammar_lazy,
            "grammar_triggers": [t.to_dict() for t in self.grammar_triggers],
            "preserved_tokens": list(self.preserved_tokens),
            "additional_stops": list(self.additional_stops),
            "thinking_start_tag": self.thinking_start_tag,
            "thinking_end_tags": list(self.thinking_end_tags),
        }
