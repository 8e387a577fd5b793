"""The structural tag and Lark exports of a template checked by their consumers themselves: xgrammar's matcher and
llguidance's.

For each round-trip scenario with tools the template can express (corpus/roundtrip), the request's constraint
(export/constrained.py) is compiled by xgrammar (`Grammar.from_structural_tag`) and by llguidance (its Lark
front end, over a byte-level tokenizer, so that any text can be fed): each must accept the intended output,
and must reject the mutations that break the format (the last closer cut, the first call's opener left out:
corpus/mutations.py). Used by the consumers' test (tests/export/test_consumers.py, `tox -e consumers`, where
xgrammar and llguidance are installed).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any, ClassVar

from autoparser.chat.compare import as_message
from autoparser.chat.request import ToolChoice
from autoparser.corpus.mutations import mutations
from autoparser.corpus.roundtrip import expressible_scenarios
from autoparser.errors import AutoparserError
from autoparser.export import for_reader, response_template
from autoparser.export.constrained import Constraint, constraint, to_lark, to_structural_tag

__all__ = ["BEAM", "BREAKING", "CONSUMERS", "CONSUMERS_FILE", "beam_results", "consumer_record", "consumer_results",
           "lark_acceptor", "record_text", "xgrammar_acceptor"]

CONSUMERS = ("xgrammar", "llguidance")
# vLLM's `beam` parser, which derives its own structural tag from the response_template we export (checked by
# xgrammar): a consumer of that export, recorded beside the two above where its modules are installed.
BEAM = "vllm-beam"
# The mutations that break the format: a constrained decoder must never let them through.
BREAKING = ("cut_last_closer", "missing_call_opener")
# A template's record of what the consumers made of its exports, in its snapshot folder (snapshots/<key>/): written
# where xgrammar and llguidance are installed (`python -m tests.export.test_consumers --write-snapshots`), checked
# there by the consumers' test, read by the corpus report.
CONSUMERS_FILE = "consumers.json"


def xgrammar_acceptor(tag: dict[str, Any]) -> Callable[[str], bool]:
    """Whether xgrammar's matcher accepts a text, whole, under a structural tag (compiled once)."""
    import xgrammar
    from xgrammar.testing import _is_grammar_accept_string

    grammar = xgrammar.Grammar.from_structural_tag(json.dumps(tag))
    return lambda text: bool(_is_grammar_accept_string(grammar, text))


@cache
def _byte_tokenizer() -> Any:
    """An llguidance tokenizer of the 256 bytes (and an end token): any text is a token sequence."""
    import llguidance

    class Bytes:
        eos_token_id: ClassVar[int] = 256
        bos_token_id: ClassVar[None] = None
        tokens: ClassVar[list[bytes]] = [bytes([i]) for i in range(256)] + [b"<|end|>"]
        special_token_ids: ClassVar[list[int]] = [256]

        def __call__(self, text: bytes | str) -> list[int]:
            return list(text if isinstance(text, bytes) else text.encode())

    return llguidance.LLTokenizer(llguidance.TokenizerWrapper(Bytes()))


def lark_acceptor(grammar: str) -> Callable[[str], bool]:
    """Whether llguidance's matcher accepts a text, whole, under a Lark grammar (a matcher per text, over the
    grammar compiled once); AutoparserError when llguidance refuses the grammar."""
    import llguidance

    compiled = llguidance.grammar_from("lark", grammar)

    def accepts(text: str) -> bool:
        matcher = llguidance.LLMatcher(_byte_tokenizer(), compiled, log_level=0)
        if matcher.is_error():
            raise AutoparserError(f"llguidance refuses the grammar: {matcher.get_error().splitlines()[0]}")
        return bool(matcher.consume_tokens(list(text.encode()))) and not matcher.is_error() \
            and matcher.is_accepting()

    return accepts


def _acceptor(consumer: str, c: Constraint) -> Callable[[str], bool]:
    return xgrammar_acceptor(to_structural_tag(c)) if consumer == "xgrammar" else lark_acceptor(to_lark(c))


def consumer_results(name: str, source: str) -> dict[str, str | None]:
    """Case id -> None (as it should be) or what went wrong, for every scenario with a tool call the template can
    express: `name::export` (the constraint of each such request exists), `name::scenario::consumer` (it accepts
    the output), `name::scenario::mutation::consumer` (it rejects the broken one). {} for a template whose
    scenarios hold no call."""
    scenarios = [(b, p) for b, p in expressible_scenarios(source) if b.request.get("tools")]
    if not any(as_message(b.expected).tool_calls for b, _ in scenarios):
        return {}
    results: dict[str, str | None] = {}
    refused: list[str] = []
    for built, params in scenarios:
        request, expected = built.request, as_message(built.expected)
        # (calls without content are checked under `required`, which xgrammar reads as "the output is calls": so
        # they are accepted as calls, not as text that holds no trigger)
        choice = ToolChoice.REQUIRED if expected.tool_calls and not expected.content.strip() else \
            ToolChoice.NONE if request.get("tool_choice") == "none" else ToolChoice.AUTO
        try:
            c = constraint(source, request["tools"], choice, bool(request.get("enable_thinking", True)),
                           bool(request.get("parallel_tool_calls")))
        except AutoparserError as e:
            refused.append(f"{built.scenario}: {e}")
            continue
        broken = list(mutations(params, built.output, expected, kinds=BREAKING))
        for consumer in CONSUMERS:
            case = f"{name}::{built.scenario}::{consumer}"
            try:
                accepts = _acceptor(consumer, c)
                results[case] = None if accepts(built.output) else f"rejects the intended output {built.output!r}"
                for m in broken:
                    results[f"{name}::{built.scenario}::{m.kind}::{consumer}"] = \
                        f"accepts the broken output {m.output!r}" if accepts(m.output) else None
            except (AutoparserError, RuntimeError, ValueError) as e:  # (a grammar the consumer refuses)
                results[case] = f"{consumer} refuses the export: {str(e).splitlines()[0]}"
    results[f"{name}::export"] = "; ".join(dict.fromkeys(r.split(": ", 1)[1] for r in refused)) or None
    return results


def beam_results(name: str, source: str) -> dict[str, str | None]:
    """Case id -> None or what went wrong, for vLLM's `beam` parser reading the response_template we export for
    it (`response_template(source, "vllm")`, here made from the transformers file: `for_reader`): for each
    scenario whose output is calls alone (the `required` requests, where beam constrains a template whose
    content has no opener), beam derives a structural tag from the template alone (vLLM's
    `tool_call_structural_tag`, as its parser calls it), and xgrammar accepts the intended output and rejects
    the broken ones under it (`name::scenario::vllm-beam`, `name::scenario::mutation::vllm-beam`). Needs vLLM's
    parser modules on sys.path (`python -m tools.vllm_beam`).
    {} for a template with no response_template or no such scenario."""
    from vllm.parser.chat_parsing.response_templates import load_response_template
    from vllm.parser.response_template_grammar import message_start_anchors, tool_call_structural_tag

    try:
        spec = response_template(source, "transformers")
    except AutoparserError:
        return {}
    scenarios = [(b, p) for b, p in expressible_scenarios(source) if b.request.get("tools")
                 and as_message(b.expected).tool_calls and not as_message(b.expected).content.strip()]
    if "tool_calls" not in spec["fields"] or not scenarios:
        return {}
    try:  # the form vLLM serves (a template it refuses is ExportError's reason)
        template = load_response_template(for_reader(spec, "vllm"))
    except (AutoparserError, ValueError) as e:
        return {f"{name}::{b.scenario}::{BEAM}": f"no response_template for vLLM: {e}" for b, _ in scenarios}
    thinking = template.fields.get("thinking")
    results: dict[str, str | None] = {}
    for built, params in scenarios:
        case, request = f"{name}::{built.scenario}::{BEAM}", built.request
        # where the prompt ends at the message's start, the tag covers the whole output (beam's `_starts_message`)
        ends = [m.end() for m in template.start_anchor_re.finditer(params.prompt)]
        at_start = bool(ends) and ends[-1] == len(params.prompt)
        try:
            tag = tool_call_structural_tag(
                template.fields["tool_calls"], [t.get("function", t) for t in request["tools"]],
                parallel_tool_calls=bool(request.get("parallel_tool_calls")), thinking=thinking,
                message_start=message_start_anchors(template) if at_start else None,
                sorted_arguments=True, strict_arguments=True)
        except ValueError as e:
            results[case] = f"beam refuses the tools: {e}"
            continue
        if tag is None:
            results[case] = "beam derives no structural tag from the response_template"
            continue
        # a reasoning the prompt opened is beam's reasoning gate's: the tag constrains what follows its end
        output = _after_open_reasoning(built.output, thinking, params.prompt)
        try:
            accepts = xgrammar_acceptor(tag)
        except (RuntimeError, ValueError) as e:
            results[case] = f"xgrammar refuses beam's tag: {str(e).splitlines()[0]}"
            continue
        results[case] = None if accepts(output) else f"rejects the intended output {output!r}"
        for m in mutations(params, built.output, as_message(built.expected), kinds=BREAKING):
            broken = _after_open_reasoning(m.output, thinking, params.prompt)
            results[f"{name}::{built.scenario}::{m.kind}::{BEAM}"] = \
                f"accepts the broken output {broken!r}" if accepts(broken) else None
    return results


def _after_open_reasoning(output: str, thinking: Any, prompt: str) -> str:
    """The output after the reasoning's end where the prompt left the reasoning open (its last opener after its
    last closer), else the whole output."""
    if thinking is None or not thinking.open_literals or not thinking.close_literals:
        return output
    start, end = thinking.open_literals[0], thinking.close_literals[0]
    if prompt.rfind(start) <= prompt.rfind(end) or end not in output:
        return output
    return output[output.index(end) + len(end):]


def consumer_record(results: Mapping[str, str | None]) -> dict[str, Any]:
    """A template's record of its `consumer_results` (and `beam_results`): whether the requests of its scenarios
    export (`exported`, or why not), and per consumer how many intended outputs it accepts and how many broken ones
    it rejects, of how many. {} for a template whose scenarios hold no call."""
    if not results:
        return {}
    record: dict[str, Any] = {}
    for case, failure in results.items():
        if case.endswith("::export"):
            record["export"] = failure or "exported"
    for consumer in (*CONSUMERS, BEAM):
        intended = [f for case, f in results.items() if case.endswith(f"::{consumer}") and case.count("::") == 2]
        broken = [f for case, f in results.items() if case.endswith(f"::{consumer}") and case.count("::") == 3]
        if consumer in CONSUMERS or intended:  # (beam only where the response_template exports calls)
            record[consumer] = {"accepted": sum(f is None for f in intended), "intended": len(intended),
                                "rejected": sum(f is None for f in broken), "broken": len(broken)}
    return record


def record_text(record: Mapping[str, Any]) -> str:
    """The record as its file holds it (canonical JSON, as every snapshot artefact)."""
    return json.dumps(record, ensure_ascii=False, indent=2, sort_keys=True) + "\n"
