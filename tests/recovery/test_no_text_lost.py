"""No text of a complete output is lost, whatever the output: a property of every corpus template.

The default parse accounts for every character of a complete output at run time (recovery/coverage.py). This
test checks it from outside, on outputs built from each template's own markup: the round-trip golden of a
call (made by rendering the template) is cut into its markers (the literals of the request's parser that it
holds) and the text between them, and random outputs interleave those pieces, dropped, repeated and
reordered, with words and whitespace. For each output:

- `parse()` does not raise;
- every word of the output is in the message (a field or a diagnostic's raw text) or in markup the parser
  reads (`unaccounted`, by words: independent of the spans the run-time check uses);
- the stream, in chunks, never raises and ends on the parse's message (with its diagnostics);
- its deltas add up to that message. Where a later chunk changes how the relaxed parser reads text it has
  read (a reading of a prefix that is no prefix of the whole's), the stream waits rather than take back what
  it sent, and its deltas add up to less: a known gap, per template, in tests/data/ratchet/stream_waits.json.
  (That every step's deltas are those of a whole re-parse is checked on the round-trip goldens and their
  mutations: tests/recovery/test_mutations.py.)

Each template's outputs come from a seeded generator, the same on every run.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from autoparser import generate
from autoparser.chat.stream import apply_deltas
from autoparser.corpus import Corpus
from autoparser.corpus.roundtrip import generate_cached, generator_request
from autoparser.params import ChatParams
from autoparser.peg import nodes as N
from autoparser.testing.ratchet import Ratchet
from autoparser.testing.recovery import markup_spans, unaccounted
from autoparser.testing.streaming import chunked
from autoparser.types import ChatMessage, ToolCall
from tests.recovery.test_mutations import ROWS, TEMPLATES, _source

STREAM_RATCHET = Ratchet(Path(__file__).resolve().parent.parent / "data" / "ratchet" / "stream_waits.json")

# How many random outputs each template gets (each is parsed whole, checked by words, and streamed).
OUTPUTS = 6
_WORDS = ("alpha", "beta", "Paris", "42", "x_y", "über", "{", "}", "\"q\"", "<", ">", "call", "[", "]")
_SPACE = ("", " ", "\n", "\n\n", "  ", "\t")


def _golden(template: str) -> dict[str, Any] | None:
    """The template's richest golden: a call with reasoning, else any call, else any row."""
    rows = ROWS[template]
    for prefix in ("e_", "d_", "c_", "g_", "b_", ""):
        for row in rows:
            if row["scenario"].startswith(prefix):
                return row
    return None


def _pieces(output: str, markers: list[str]) -> list[str]:
    """`output` cut into the markers it holds and the text between them."""
    if not markers:
        return [output]
    pattern = re.compile("|".join(re.escape(m) for m in sorted(markers, key=len, reverse=True)))
    out, pos = [], 0
    for m in pattern.finditer(output):
        if m.start() > pos:
            out.append(output[pos:m.start()])
        out.append(m.group())
        pos = m.end()
    if pos < len(output):
        out.append(output[pos:])
    return out


def _outputs(template: str, output: str, markers: list[str]) -> list[str]:
    rng = random.Random(int(hashlib.sha256(template.encode()).hexdigest()[:12], 16))
    pieces = _pieces(output, markers)
    made = []
    for _ in range(OUTPUTS):
        chosen = [p for p in pieces if rng.random() > 0.2]
        for _ in range(rng.randint(0, 3)):  # a piece repeated or moved
            if chosen:
                chosen.insert(rng.randrange(len(chosen) + 1), rng.choice(pieces))
        for _ in range(rng.randint(0, 4)):  # words and whitespace the template does not write
            chosen.insert(rng.randrange(len(chosen) + 1), rng.choice(_SPACE) + rng.choice(_WORDS) + rng.choice(_SPACE))
        if chosen and rng.random() < 0.3:  # cut short
            chosen = chosen[:rng.randrange(1, len(chosen) + 1)]
        made.append("".join(chosen))
    return made


def _stream_problems(params: ChatParams, output: str, whole: ChatMessage) -> tuple[str | None, str | None]:
    """What the stream broke of its promises (raised, or ended elsewhere than the parse), and whether its
    deltas add up to less than its final message (it waited)."""
    stream, sent = params.stream(), ChatMessage()
    try:
        for chunk in chunked(output, range(7, len(output.encode()), 7)):
            sent = apply_deltas(sent, stream.feed(chunk))
        final = stream.finish()
        sent = apply_deltas(sent, stream.last_deltas)
    except Exception as e:
        return f"the stream raised {type(e).__name__}: {e}", None
    if final != whole:
        return f"the stream ends on {final}, the parse gives {whole}", None
    if (sent.content, sent.reasoning_content, [(c.name, c.arguments) for c in sent.tool_calls]) != \
            (final.content, final.reasoning_content, [(c.name, c.arguments) for c in final.tool_calls]):
        return None, f"{output!r}: the deltas add up to {sent}, the stream ends on {final}"
    return None, None


def _golden_params(template: str) -> tuple[dict[str, Any], ChatParams]:
    """The template's richest golden and the parameters of its request (the test skipped where it does not
    render)."""
    row = _golden(template)
    assert row is not None
    try:
        return row, generate_cached(_source(row), generator_request(row["request"]))
    except Exception:
        pytest.skip("the request does not render (the round-trip suite says why)")


@pytest.mark.parametrize("template", TEMPLATES)
def test_random_outputs_of_the_templates_markers_lose_no_text(template: str) -> None:
    row, params = _golden_params(template)
    arena = params.reader.plan.relaxed
    markers = sorted({n.literal for n in arena.parsers if isinstance(n, N.Literal) and n.literal.strip()
                      and n.literal in row["output"]})
    # The words of the format's own markers (`<parameter=` holds `parameter`): markup wherever the reading takes
    # them for it, which the check's own markup spans (one parse of the output) may not say.
    marker_words = Counter({w: 1_000_000 for n in arena.parsers if isinstance(n, N.Literal)
                            for w in re.findall(r"\w+", n.literal)})
    problems, waits = [], []
    for output in _outputs(template, row["output"], markers):
        try:
            got = params.parse(output)
        except Exception as e:
            problems.append(f"{output!r}: parse() raised {type(e).__name__}: {e}")
            continue
        lost = unaccounted(output, got, markup_spans(params, output, got)) - marker_words
        if lost:
            problems.append(f"{output!r}: text lost: {dict(lost)} -> {got}")
        broken, waited = _stream_problems(params, output, got)
        if broken:
            problems.append(f"{output!r}: {broken}")
        if waited:
            waits.append(waited)
    assert not problems, "\n".join(problems)
    STREAM_RATCHET.check(template, "\n".join(waits) or None)


# How many outputs cut inside a marker each template gets.
CUTS = 24


@pytest.mark.parametrize("template", TEMPLATES)
def test_outputs_cut_inside_a_marker_lose_no_text(template: str) -> None:
    """A generation stopped inside a marker's text (`<tool_ca`, `{"tool_call_id": "0", "`, `</thi`): the template's
    richest golden cut at seeded points inside the markers it holds, each read as a complete output. No word is
    lost (an opener cut off is text; a closer cut off closes what it began: markup). The random outputs above cut
    between markers only; this found calls cut before their name after their id was read, whose text went."""
    row, params = _golden_params(template)
    arena, output = params.reader.plan.relaxed, row["output"]
    literals = {n.literal for n in arena.parsers if isinstance(n, N.Literal) and len(n.literal.strip()) > 2}
    cuts = sorted({m.start() + k for lit in literals for m in re.finditer(re.escape(lit), output)
                   for k in range(1, len(lit))})
    marker_words = Counter({w: 1_000_000 for lit in literals for w in re.findall(r"\w+", lit)})
    rng = random.Random(int(hashlib.sha256(template.encode()).hexdigest()[:12], 16))
    problems = []
    for cut in sorted(rng.sample(cuts, min(CUTS, len(cuts)))):
        text = output[:cut]
        got = params.parse(text)
        lost = unaccounted(text, got, markup_spans(params, text, got)) - marker_words
        if lost:
            problems.append(f"{text!r}: text lost: {dict(lost)} -> {got}")
    assert not problems, "\n".join(problems)


def test_the_stream_ratchet_names_real_templates() -> None:
    STREAM_RATCHET.check_known(TEMPLATES)


_WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


@pytest.mark.parametrize("template", ["google__gemma-4-26B-A4B-it", "unsloth__gemma-4"])
@pytest.mark.parametrize("thinking", [True, False])
@pytest.mark.parametrize("output", [
    "the user wants the weather<channel|>The answer is sunny.",
    'the user wants the weather\n<channel|>call:get_weather{city:<|"|>Paris<|"|>}<tool_call|>',
])
def test_text_after_a_stray_channel_end_is_not_stepped_over(template: str, thinking: bool, output: str) -> None:
    """Gemma 4's templates end a thought with `<channel|>`; an output that writes it with no thought open (or
    after the one the prompt closed) sent llama.cpp's parser scanning for a call to the end of the output, and
    the default parse let that stand: everything after the marker was gone, with no diagnostic (the random
    outputs above found it, once their check stopped counting a scan's span as markup). A scan that reaches the
    end of a complete output stepped over its text: the message holds every word, and says what it repaired."""
    source = Corpus.load().by_name(template).read_text()
    params = generate(source, {"messages": [{"role": "user", "content": "Hi"}], "tools": [_WEATHER],
                               "enable_thinking": thinking, "reasoning_format": "auto"})
    got = params.parse(output)
    assert not unaccounted(output, got, markup_spans(params, output, got)), got
    assert got.diagnostics, got
    assert ("sunny" in got.content) if "sunny" in output else [c.name for c in got.tool_calls] == ["get_weather"]


@pytest.mark.parametrize(("output", "message", "lost"), [
    # a call's name and its first argument's name joined (the marker between them left out): both whole words
    ("get_weathercity", ChatMessage(tool_calls=(ToolCall("get_weather", '{"city":"P"}'),)), {}),
    # a word only parts of which are in the fields, not as whole words, is lost
    ("Parisian weather", ChatMessage(content="Paris weather is fine"), {"Parisian": 1}),
    ("Parisian weather", ChatMessage(content="weather ian"), {"Parisian": 1}),
    # each part used once: a word whose two parts are one word of a field is lost
    ("abab", ChatMessage(content="ab"), {"abab": 1}),
])
def test_a_word_written_across_two_fields_is_accounted_only_by_two_whole_words(
        output: str, message: ChatMessage, lost: dict[str, int]) -> None:
    """The word check of `unaccounted` (by words, not by the run-time spans): a word the output writes across two
    fields, a marker between them left out (GLM's `<tool_call>NAMEkey</arg_key>`, vLLM PR #47190), is there when
    each part is a whole word of a field; anything less is a lost word still."""
    assert dict(unaccounted(output, message, [])) == lost
