"""Import ../shared/corpus-seed into corpus/ (run once; the result is committed data).

usage: python tools/seed_corpus.py [--from ../shared/corpus-seed] [--corpus corpus]
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from autoparser.corpus.seed import import_seed


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--from", dest="seed", default="../shared/corpus-seed")
    p.add_argument("--corpus", default="corpus")
    args = p.parse_args()
    seed, corpus = Path(args.seed), Path(args.corpus)
    manifest = import_seed(seed, corpus)
    ids = seed / "hub-model-ids.txt"
    if ids.exists():
        shutil.copyfile(ids, corpus / "model-ids.txt")
    origins = sum(len(e.origins) for e in manifest.templates)
    print(f"{len(manifest.templates)} template files from {origins} seed templates")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
