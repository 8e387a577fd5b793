"""The incremental StreamParser against the definition of streaming: the deltas between whole parses.

The reference (autoparser.testing.streaming) is what llama.cpp's server does: after every chunk, parse the whole
output so far and send `compute_deltas(previous, current)`. For every C++ chat case (tests/data/chat_cases.jsonl;
tests/corpus/test_roundtrip.py does the same for every round-trip golden output), whatever the chunking
(characters, bytes cut inside UTF-8 sequences and inside markers, random sizes), the StreamParser must give the same deltas chunk by chunk, raise where the
reference raises, and end on the same final message.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoparser import generate
from autoparser.chat.stream import StreamParser
from autoparser.errors import AutoparserError, ParseError
from autoparser.params import ChatParams
from autoparser.peg.resume import ends_inside_marker
from autoparser.testing.chat_cases import ChatCases, template_source
from autoparser.testing.streaming import stream_mismatch
from autoparser.types import ChatFormat, ChatMessage, MessageDelta

CHAT = ChatCases(Path(__file__).resolve().parent.parent / "data")
CASES = CHAT.cases


def assert_same_stream(params: ChatParams, output: str, cuts: Sequence[int], final_partial: bool) -> None:
    problem = stream_mismatch(params, output, cuts, final_partial)
    assert problem is None, f"{problem}\noutput: {output!r}"


def _every(k: int, n: int) -> list[int]:
    return list(range(k, n, k))


def _feed_in_chunks(stream: StreamParser, data: str | bytes, size: int) -> tuple[list[MessageDelta], int]:
    """Feed `data` `size` units at a time (not finished); the deltas sent and the number of steps."""
    deltas: list[MessageDelta] = []
    steps = 0
    for i in range(0, len(data), size):
        deltas += stream.feed(data[i:i + size])
        steps += 1
    return deltas, steps


@pytest.mark.parametrize("index", range(len(CASES)), ids=CHAT.ids)
def test_chat_case_streams_like_reparsing(index: int) -> None:
    case = CASES[index]
    params = CHAT.params_or_xfail(index)
    n = len(case["input"].encode("utf-8"))
    rnd = random.Random(index)
    chunkings = [_every(3, n), sorted(rnd.sample(range(1, n), min(n - 1, 16))) if n > 1 else []]
    if n <= 400:  # byte by byte: every cut inside every marker and UTF-8 sequence (quadratic reference)
        chunkings.append(_every(1, n))
    for cuts in chunkings:
        assert_same_stream(params, case["input"], cuts, case["is_partial"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_chunking_of_any_case(data: st.DataObject) -> None:
    index = data.draw(st.integers(0, len(CASES) - 1), label="case")
    case = CASES[index]
    try:
        params = CHAT.params(index)
    except AutoparserError:
        return  # listed gaps; test_chat_case_streams_like_reparsing reports them
    n = len(case["input"].encode("utf-8"))
    cuts = data.draw(st.lists(st.integers(1, max(1, n - 1)), max_size=40), label="cuts")
    assert_same_stream(params, case["input"], cuts, case["is_partial"])


# --- resuming, not re-parsing ------------------------------------------------------------------------------------

BENCH = [json.loads(line) for line in (Path(__file__).resolve().parents[2] / "tools" / "data" /
                                       "parse_bench.jsonl").read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("case", BENCH, ids=[c["id"] for c in BENCH])
def test_long_outputs_are_mostly_resumed(case: dict[str, Any]) -> None:
    """Streaming 4 bytes at a time parses from the start only where a marker may begin, not at every step."""
    params = generate(template_source(case["template"]),
                      {"messages": case["messages"], "tools": case.get("tools") or [], "reasoning_format": "auto",
                       "now": "2024-07-26"})
    for out in case["outputs"]:
        stream = params.stream()
        deltas, steps = _feed_in_chunks(stream, out.encode("utf-8"), 4)
        final = stream.finish()
        assert final == params.parse(out)
        assert stream.full_parses <= steps // 4 + 2, (stream.full_parses, steps)
        assert "".join(d.content_delta for d in deltas + stream.last_deltas) == final.content


@pytest.mark.parametrize("case", BENCH, ids=[c["id"] for c in BENCH])
def test_reading_the_stream_between_chunks_changes_nothing(case: dict[str, Any]) -> None:
    """Most chunks take the fast path, which leaves the resumed parse behind until it is needed (StreamParser
    `_fast`); reading the text or the message between chunks brings it up to date, and the deltas, the parses
    from the start and the final message stay those of a stream nobody reads."""
    params = generate(template_source(case["template"]),
                      {"messages": case["messages"], "tools": case.get("tools") or [], "reasoning_format": "auto",
                       "now": "2024-07-26"})
    out = case["outputs"][0]
    data = out.encode("utf-8")
    quiet, read = params.stream(), params.stream()
    for i in range(0, len(data), 4):
        assert read.feed(data[i:i + 4]) == quiet.feed(data[i:i + 4])
        if i % 12 == 0:
            assert out.encode("utf-8", "surrogateescape").startswith(read.text.encode("utf-8", "surrogateescape"))
            assert read.message.content == quiet.message.content
    assert read.finish() == quiet.finish() == params.parse(out)
    assert read.last_deltas == quiet.last_deltas
    assert read.full_parses == quiet.full_parses


def test_feed_after_finish_is_an_error() -> None:
    stream = StreamParser()
    stream.feed("hello")
    assert stream.finish() == ChatMessage(content="hello")
    with pytest.raises(ParseError, match="finished"):
        stream.feed("more")


def test_a_false_marker_start_costs_one_parse_not_two() -> None:
    """Text ending in `<` (maybe a marker) needs a parse from the start; the next chunk, showing it was none,
    extends the last resumable parse over both chunks instead of parsing again."""
    from autoparser.chat.builder import build_chat_peg_parser

    arena = build_chat_peg_parser(lambda p: p.content(p.until("<tool_call>")) + p.optional(
        p.literal("<tool_call>") + p.tool(p.tool_name(p.chars("[a-z]")))) + p.end())
    text = "if a <b and c < d: " * 50
    stream = StreamParser(arena)
    deltas: list[MessageDelta] = []
    for ch in text:
        deltas += stream.feed(ch)
    assert stream.finish() == ChatMessage(content=text)
    assert "".join(d.content_delta for d in deltas + stream.last_deltas) == text
    assert stream.full_parses <= text.count("<") + 2, stream.full_parses
    assert deltas + stream.last_deltas == _reparsed_deltas(arena, text, 1)


def test_a_marker_cut_across_chunks_costs_two_parses_not_one_per_chunk() -> None:
    """Text ending inside a marker (`<tool_ca`) parses from the start once; chunks that only lengthen the marker
    extend that parse; the chunk completing it parses again. Same deltas as re-parsing at every character."""
    from autoparser.chat.builder import build_chat_peg_parser

    arena = build_chat_peg_parser(lambda p: p.reasoning(p.until("</think>")) + p.literal("</think>")
                                  + p.content(p.until("<tool_call>")) + p.optional(
        p.literal("<tool_call>") + p.tool(p.tool_name(p.chars("[a-z]")))) + p.end())
    text = "let me see </thin and more. " * 3 + "</think>" + "The answer. <tool_c and more. " * 3 + "<tool_call>get"
    stream = StreamParser(arena)
    deltas: list[MessageDelta] = []
    for ch in text:
        deltas += stream.feed(ch)
    final = stream.finish()
    assert final == _reparsed_message(arena, text)
    assert deltas + stream.last_deltas == _reparsed_deltas(arena, text, 1)
    # One parse where each of the 8 markers begins (6 of them turn out to be none: the scan before them extends
    # over them), one where "</think>" and "<tool_call>" complete, one per character of the name (a character
    # run cut by the end), the first chunk and finish().
    assert stream.full_parses <= 8 + 2 + 3 + 2, stream.full_parses


def _reparsed_deltas(arena: Any, text: str, step: int) -> list[MessageDelta]:
    """The deltas of whole parses after every `step` characters (the definition of streaming)."""
    from autoparser.chat.mapper import peg_parse
    from autoparser.chat.stream import compute_deltas

    prev, out = ChatMessage(), []
    for i in [*range(step, len(text), step), len(text)]:
        cur = peg_parse(arena, text[:i], is_partial=i < len(text))
        if not cur.empty():
            out += compute_deltas(prev, cur)
            prev = cur
    return out


@pytest.mark.parametrize("size", [1, 3])
def test_escapes_inside_a_json_string_are_resumed(size: int) -> None:
    """Escapes in a JSON string, whole in a chunk or cut by a chunk boundary (`\\`, `\\u00`), extend the last
    parse: the string body stops before an incomplete escape, so the field grows by the text before it and the
    escape waits for its next chunk. Same deltas as re-parsing after every chunk."""
    from autoparser.chat.builder import build_chat_peg_parser

    arena = build_chat_peg_parser(lambda p: p.tool(
        p.tool_open(p.literal("<call>")) + p.tool_name(p.chars("[a-z]")) + p.tool_args(p.json())
        + p.tool_close(p.literal("</call>"))) + p.end())
    line = 'print(\\"total:\\", total)  # caf\\u00e9\\n'
    text = '<call>f{"code": "' + line * 30 + '"}</call>'
    stream = StreamParser(arena)
    deltas, _ = _feed_in_chunks(stream, text, size)
    final = stream.finish()
    assert json.loads(final.tool_calls[0].arguments)["code"] == 'print("total:", total)  # café\n' * 30
    escapes = [m.span() for m in re.finditer(r"\\(?:u[0-9a-f]{4}|.)", text)]
    cut = sum(1 for b in range(size, len(text), size) if any(a < b < e for a, e in escapes))
    assert cut >= 60
    # Only the markers and the structure around the string parse from the start (13 with one-character
    # chunks; a parse per cut escape, as before, made it 253)
    assert stream.full_parses <= 13, (stream.full_parses, cut)
    assert deltas + stream.last_deltas == _reparsed_deltas(arena, text, size)


@pytest.mark.parametrize("value_kind", ["json", "xml"])
def test_growing_arguments_are_appended_without_mapping_again(value_kind: str, monkeypatch: Any) -> None:
    """Inside a JSON argument string, and inside an XML-style string value, a chunk extends the last call's
    arguments directly (raw, right-stripped for JSON; JSON-escaped for a value): same deltas as re-parsing,
    whitespace runs cut by chunk boundaries included, and no mapping of the whole tree per chunk."""
    from autoparser.chat import stream as stream_module
    from autoparser.chat.builder import build_chat_peg_parser

    if value_kind == "json":
        arena = build_chat_peg_parser(lambda p: p.tool(
            p.tool_open(p.literal("<call>")) + p.tool_name(p.chars("[a-z]")) + p.tool_args(p.json())
            + p.tool_close(p.literal("</call>"))) + p.end())
        body = 'x = 1   \\n\\t  y = "2"  ' * 20
        text = '<call>f{"code": "' + body.replace('"2"', '\\"2\\"') + '"}</call>'
    else:
        arena = build_chat_peg_parser(lambda p: p.tool(
            p.tool_open(p.literal("<call>")) + p.tool_name(p.chars("[a-z]")) + p.literal("\n")
            + p.tool_args(p.tool_arg(p.tool_arg_open(p.literal("<")) + p.tool_arg_name(p.literal("code"))
                + p.literal(">") + p.tool_arg_string_value(
                p.until("</code>")) + p.tool_arg_close(p.literal("</code>"))))
            + p.tool_close(p.literal("</call>"))) + p.end())
        text = "<call>f\n<code>" + 'x = "1"   \n\t  caf\u00e9 \\ y\n' * 20 + "</code></call>"
    maps = resumable = 0
    real_map, real_resumption = stream_module.map_growing, stream_module.resumption

    def counting_map(*args: Any, **kwargs: Any) -> Any:
        nonlocal maps
        maps += 1
        return real_map(*args, **kwargs)

    def counting_resumption(*args: Any, **kwargs: Any) -> Any:
        nonlocal resumable
        found = real_resumption(*args, **kwargs)
        # after a parse from the start (a parse ending inside a marker is resumed lazily, and never mapped)
        resumable += found is not None and not ends_inside_marker(args[1])
        return found

    monkeypatch.setattr(stream_module, "map_growing", counting_map)
    monkeypatch.setattr(stream_module, "resumption", counting_resumption)
    stream = StreamParser(arena)
    deltas, steps = _feed_in_chunks(stream, text, 3)
    final = stream.finish()
    assert final == _reparsed_message(arena, text)
    assert deltas + stream.last_deltas == _reparsed_deltas(arena, text, 3)
    # The tree is mapped only after a resumable parse from the start. A chunk catching up over text that was
    # parsed from the start (a `<` that may open the closing tag) or held back (an escape cut by a chunk
    # boundary) grows the message from before that text; every other step is a direct append.
    assert maps == resumable < stream.full_parses, (maps, resumable, stream.full_parses, steps)
    assert steps - stream.full_parses - maps >= steps // 2, (maps, stream.full_parses, steps)


def _reparsed_message(arena: Any, text: str) -> ChatMessage:
    from autoparser.chat.mapper import peg_parse

    return peg_parse(arena, text)


@cache
def _args_arenas() -> dict[str, Any]:
    from autoparser.chat.builder import build_chat_peg_parser

    return {
        "json": build_chat_peg_parser(lambda p: p.reasoning(p.until("</r>")) + p.literal("</r>") + p.tool(
            p.tool_open(p.literal("<call>")) + p.tool_name(p.chars("[a-z]")) + p.tool_args(p.json())
            + p.tool_close(p.literal("</call>"))) + p.end()),
        "xml": build_chat_peg_parser(lambda p: p.reasoning(p.until("</r>")) + p.literal("</r>") + p.tool(
            p.tool_open(p.literal("<call>")) + p.tool_name(p.chars("[a-z]")) + p.literal("\n")
            + p.tool_args(p.tool_arg(p.tool_arg_open(p.literal("<")) + p.tool_arg_name(p.literal("v"))
                + p.literal(">") + p.tool_arg_string_value(
                p.until("\n</v>")) + p.tool_arg_close(p.literal("\n</v>"))))
            + p.tool_close(p.literal("</call>"))) + p.end()),
    }


@settings(max_examples=120, deadline=None)
@given(kind=st.sampled_from(["json", "xml"]),
       value=st.text(st.sampled_from(list(' \t\n"\\<>/vé{}ab')), max_size=60),
       data=st.data())
def test_growing_arguments_stream_like_reparsing(kind: str, value: str, data: st.DataObject) -> None:
    """Whitespace runs, escapes, near-delimiters and non-ASCII in a growing argument, cut anywhere."""
    if kind == "json":
        text = ' plan\n</r><call>f{"v": ' + json.dumps(value, ensure_ascii=False) + "}</call>"
    else:
        value = value.replace("\n</v>", "")
        text = " plan\n</r><call>f\n<v>" + value + "\n</v></call>"
    params = ChatParams(format=ChatFormat.PEG_NATIVE, parser=_args_arenas()[kind])
    n = len(text.encode("utf-8"))
    cuts = data.draw(st.lists(st.integers(1, n - 1), max_size=30), label="cuts")
    assert_same_stream(params, text, cuts, final_partial=False)
