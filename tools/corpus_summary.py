"""The main job on the embedded corpus: analyse every template in corpus/ and summarise what was found.

    python -m tools.corpus_summary [--json OUT] [--limit N]

Prints, per template, its reasoning / content / tool-call formats and the markers found, then totals per
format. Templates the analyzer cannot handle are listed with the error message (they are data, not crashes).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

from autoparser.analysis.analyzer import analyze_template
from autoparser.corpus import Corpus
from autoparser.errors import AutoparserError

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--corpus", type=Path, default=ROOT / "corpus")
    ap.add_argument("--json", type=Path, help="also write every analysis as JSON lines here")
    ap.add_argument("--limit", type=int, default=0, help="only the first N templates")
    args = ap.parse_args(argv)

    corpus = Corpus.load(args.corpus)
    entries = list(corpus.entries)[: args.limit or None]
    formats: Counter[str] = Counter()
    failed: list[tuple[str, str]] = []
    records = []
    t0 = time.perf_counter()
    for e in entries:
        try:
            a = analyze_template(e.read_text()).to_dict()
        except AutoparserError as err:
            failed.append((e.name, str(err).splitlines()[0]))
            continue
        records.append({"name": e.name, **a})
        tools = a.get("tools", {}).get("format", {})
        key = f"reasoning={a['reasoning']['mode']} content={a['content']['mode']} tools={tools.get('mode', 'NONE')}"
        formats[key] += 1
        marks = [m for m in (a["reasoning"]["start"], a["reasoning"]["end"], tools.get("section_start"),
                             tools.get("per_call_start")) if m]
        print(f"{e.name:<70} {key:<60} {' '.join(repr(m) for m in marks)}")
    took = time.perf_counter() - t0
    print(f"\n{len(entries)} templates analysed in {took:.1f} s; {len(failed)} could not be analysed\n")
    for key, n in formats.most_common():
        print(f"{n:5d}  {key}")
    for name, msg in failed:
        print(f"  not analysed: {name}: {msg}")
    if args.json:
        args.json.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
