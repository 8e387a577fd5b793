"""Reading what models write around their template's markup (autoparser.corpus.variants), on every template.

Every round-trip golden our parse reads right (as tests/recovery/test_mutations.py takes them) is rewritten in
each layout that applies to its template (autoparser.corpus.variants.KINDS: the markup on one line or spread
over blank, indented lines, one section per call or several calls in one section, a call's closer left out
before the next call, the section markers left out, the reasoning start or end left out, the reasoning block after
the answer, a value's opener left out after its name's closer, or the name's own opener, a value's closer written
twice, the marker or the fence before a call's JSON arguments left out, a fence written where the template writes
none, a JSON call in OpenAI's wrapper or with its arguments under the other usual key, a marker mentioned in the
content, a closer cut short at the end).
For each variant:

- `parse()` never raises, and gives what the variant must keep (`Variant.checks`: the intended calls,
  reasoning and content);
- no text is lost: every word of the output is in a field, in markup the parser reads or in a diagnostic
  (`unaccounted`, as the mutation tests check it);
- the stream, fed in chunks, ends on the message of the whole parse.

What fails is in tests/data/ratchet/variants.json, keyed `<set>:<template>::<scenario>::<kind>`, each with a
reason saying what goes wrong and which repairs the parse named (`silent` where none). A listed case that
starts passing fails the test until it is removed: `python -m tests.recovery.test_variants --write-ratchet`
rewrites the file from the current results (`--jobs N` spreads it over N processes).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from autoparser.chat.compare import as_message
from autoparser.corpus.roundtrip import generate_cached, generator_request
from autoparser.corpus.variants import KINDS, Variant, kept, markers_of, variants
from autoparser.params import ChatParams
from autoparser.params.generator import cached_analysis
from autoparser.peg import nodes as N
from autoparser.testing.ratchet import Ratchet
from autoparser.testing.recovery import markup_spans, unaccounted
from autoparser.testing.streaming import chunked
from autoparser.types import ChatMessage
from tests.recovery.test_mutations import GOLDEN_RATCHET, ROWS, TEMPLATES, _source, row_id

RATCHET = Ratchet(Path(__file__).resolve().parent.parent / "data" / "ratchet" / "variants.json")
# The stream is fed in chunks of this many bytes (a marker of a few characters then arrives in pieces).
CHUNK = 7


def _failure(params: ChatParams, variant: Variant, marker_words: Counter[str]) -> str | None:
    """What goes wrong with one variant, in a few words; None when it reads as meant."""
    try:
        got = params.parse(variant.output)
    except Exception as e:  # (never: a complete output always parses)
        return f"gap: parse() raises {type(e).__name__}"
    problems = [_short(p) for p in kept(variant, got)]
    lost = unaccounted(variant.output, got, markup_spans(params, variant.output, got)) - marker_words
    if lost:
        problems.append("text lost: " + " ".join(sorted(lost)))
    stream = params.stream()
    try:
        for chunk in chunked(variant.output, range(CHUNK, len(variant.output.encode()), CHUNK)):
            stream.feed(chunk)
        final: ChatMessage | None = stream.finish()
    except Exception as e:
        problems.append(f"the stream raises {type(e).__name__}")
        final = None
    if final is not None and final != got:
        problems.append("the stream ends elsewhere than the parse")
    if not problems:
        return None
    repairs = sorted({d.kind for d in got.diagnostics})
    return f"gap: {'; '.join(dict.fromkeys(problems))} ({', '.join(repairs) if repairs else 'silent'})"


def _marker_words(params: ChatParams) -> Counter[str]:
    """The words of the format's own markers (`<parameter=` holds `parameter`): markup wherever the reading
    takes them for it, which the check's own markup spans (one parse of the output) may not say, as in
    tests/recovery/test_no_text_lost.py. (A marker kept in the content is checked there, by `kept`.)"""
    return Counter({w: 1_000_000 for n in params.reader.plan.relaxed.parsers if isinstance(n, N.Literal)
                    for w in re.findall(r"\w+", n.literal)})


def _short(difference: str) -> str:
    """A field difference (chat.compare) without the texts it quotes: what the ratchet says of it."""
    field, _, rest = difference.partition(": ")
    if field == "tool_calls":
        return "tool_calls: " + rest.split(":")[0].replace("expected ", "")
    if field.startswith("tool_calls["):
        return f"{field} differs"
    if field == "reasoning_content" and rest.endswith("got ''"):
        return "no reasoning"
    if field == "content" and rest.startswith("expected ''"):
        return "text read as content"
    return f"{field} differs"


def template_results(template: str) -> Iterator[tuple[str, str | None]]:
    """(case, failure or None) for every variant of every round-trip golden of `template` we read right."""
    for row in ROWS[template]:
        if row_id(row) in GOLDEN_RATCHET.entries:
            continue  # our parse of the unbroken output is already wrong: nothing to vary
        source = _source(row)
        try:
            params = generate_cached(source, generator_request(row["request"]))
            analysis = cached_analysis(source)
        except Exception:
            continue  # a request that cannot be built is the round-trip suite's to report
        markers, words = markers_of(params, analysis), _marker_words(params)
        for variant in variants(params, row["output"], as_message(row["expected_from_output"]), markers):
            yield f"{row_id(row)}::{variant.kind}", _failure(params, variant, words)


@pytest.mark.parametrize("template", TEMPLATES)
def test_variants_read_as_meant(template: str) -> None:
    RATCHET.check_many(dict(template_results(template)))


def test_the_variants_ratchet_names_real_cases() -> None:
    cases = {f"{row_id(row)}::{kind}" for rows in ROWS.values() for row in rows for kind in KINDS}
    RATCHET.check_known(cases)


def _all_results(jobs: int) -> dict[str, str | None]:
    if jobs <= 1:
        return {case: failure for t in TEMPLATES for case, failure in template_results(t)}
    from concurrent.futures import ProcessPoolExecutor
    with ProcessPoolExecutor(jobs) as pool:
        return {case: failure for part in pool.map(_listed, TEMPLATES, chunksize=4) for case, failure in part}


def _listed(template: str) -> list[tuple[str, str | None]]:
    return list(template_results(template))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write-ratchet", action="store_true", help=f"rewrite {RATCHET.path.name} from the results")
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args(argv)
    results = _all_results(args.jobs)
    failures = {case: failure for case, failure in sorted(results.items()) if failure is not None}
    by_kind = {kind: [0, 0] for kind in KINDS}
    for case, failure in results.items():
        counts = by_kind[case.rsplit("::", 1)[1]]
        counts[0] += 1
        counts[1] += failure is None
    for kind, (made, passed) in by_kind.items():
        print(f"{kind:38} {passed:5} of {made:5} read as meant")
    if args.write_ratchet:
        RATCHET.path.write_text(json.dumps(failures, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"{RATCHET.path}: {len(failures)} entries")
    return 0


if __name__ == "__main__":
    sys.exit(main())
