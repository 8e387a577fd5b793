#!/usr/bin/env python3
"""Make tests/data/strict_mutations.jsonl: round-trip outputs broken the way models break them, and what
llama.cpp's strict parse makes of each (the live oracle's answer).

    python -m tools.make_strict_mutations --driver build/cpp_oracle/cpp_oracle [--jobs 2]

The inputs are the round-trip goldens of the seed templates (tests/data/roundtrip/roundtrip_seed.jsonl.gz,
made by the C++ reference): each row's output is broken by every mutation of autoparser.corpus.mutations that
applies to it (KINDS, and the generation cut inside the last call's arguments), with the markers of the
row's request as autoparser generates it. The `cpp` field of each mutated row is the driver's: the strict
parse's message (an assistant message's own fields) or its error. Rows keep the goldens' order, then the
mutations' order (about 900 rows, 14 per template on average, 22 at most: no cap needed). `autoparser
conformance --regenerate` rewrites the `cpp` fields of the file from a driver
(autoparser.testing.cpp_oracle.regenerate_goldens); tests/conformance/test_strict_mutations.py checks that the
inputs are still what the mutations make of the goldens.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

from autoparser.corpus import Corpus
from autoparser.testing.cpp_oracle import (
    STRICT_MUTATIONS,
    dumps_golden,
    strict_mutation_answers,
    strict_mutation_rows,
)

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
SOURCE = DATA / "roundtrip" / "roundtrip_seed.jsonl.gz"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.make_strict_mutations",
                                 description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--driver", type=Path, required=True, help="the C++ oracle driver (python -m tools.cpp_oracle)")
    ap.add_argument("--jobs", type=int, default=1, help="driver processes")
    ap.add_argument("--out", type=Path, default=DATA / STRICT_MUTATIONS)
    args = ap.parse_args(argv)
    if not args.driver.is_file():
        print(f"no C++ driver at {args.driver} (build it: python -m tools.cpp_oracle)", file=sys.stderr)
        return 2
    corpus = Corpus.load()
    with gzip.open(SOURCE, "rt", encoding="utf-8") as f:
        goldens = [json.loads(line) for line in f]
    rows = strict_mutation_rows(goldens, corpus)
    print(f"{len(goldens)} golden outputs, {len(rows)} mutated; asking the driver", file=sys.stderr)

    def progress(done: int, total: int) -> None:
        print(f"\r  {done}/{total} driver jobs", end="\n" if done == total else "", file=sys.stderr, flush=True)

    answers = strict_mutation_answers(args.driver, rows, corpus, workers=max(1, args.jobs), progress=progress)
    text = "".join(dumps_golden({**r, "cpp": a}) + "\n" for r, a in zip(rows, answers))
    args.out.write_text(text, encoding="utf-8")
    errors = sum("error" in a for a in answers)
    print(f"{args.out}: {len(rows)} rows ({errors} the C++ refuses)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
