"""Agreement with the peer engines' own test vectors (tests/data/peers), per source file and per parser family.

tests/conformance/test_peers.py holds every vector to its ratchet entry (tests/data/ratchet/peers.json): a vector
is in the ratchet exactly when autoparser disagrees with what the peer's test asserts, so the ratchet at a commit
is that commit's measurement. `--ratchet` reads another one (e.g. `git show REV:tests/data/ratchet/peers.json`)
to print the figures before a change beside those after it.

usage: python -m tools.peers_report [--ratchet OLD.json]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"


def _figures(vectors: dict[str, str], ratchet: dict[str, str]) -> dict[str, tuple[int, int, int, int]]:
    """group -> (agree, total, policy, gap) over the vectors (id -> group) that exist."""
    total, agree, policy, gap = Counter[str](), Counter[str](), Counter[str](), Counter[str]()
    for vid, group in vectors.items():
        total[group] += 1
        reason = ratchet.get(vid)
        if reason is None:
            agree[group] += 1
        elif reason.startswith("policy"):
            policy[group] += 1
        else:
            gap[group] += 1
    return {g: (agree[g], total[g], policy[g], gap[g]) for g in sorted(total)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--ratchet", type=Path, help="a ratchet to compare with (the figures before)")
    args = p.parse_args()
    ids = {path.stem: [json.loads(line)["id"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
           for path in sorted((DATA / "peers").glob("*.jsonl"))}
    now = json.loads((DATA / "ratchet" / "peers.json").read_text(encoding="utf-8"))
    before = json.loads(args.ratchet.read_text(encoding="utf-8")) if args.ratchet else None
    by_file = {vid: stem for stem, vids in ids.items() for vid in vids}
    by_family = {vid: "/".join(vid.split("/")[:2]) for vid in by_file}
    for title, groups in (("per source", by_file), ("per family", by_family)):
        print(f"{title}: agree/total (policy, gap){'   before' if before is not None else ''}")
        old = _figures(groups, before) if before is not None else {}
        for g, (a, t, pol, gap) in _figures(groups, now).items():
            was = f"   {old[g][0]}/{old[g][1]}" if g in old else ""
            print(f"  {g:48} {a:4}/{t:<4} ({pol} policy, {gap} gap){was}")
    a, t, pol, gap = (sum(x) for x in zip(*_figures({v: "all" for v in by_file}, now).values()))
    print(f"all: {a}/{t} agree ({100 * a / t:.1f}%), {pol} policy, {gap} gap")
    if before is not None:
        b = _figures({v: "all" for v in by_file}, before)["all"]
        print(f"before (same vectors): {b[0]}/{b[1]} agree ({100 * b[0] / b[1]:.1f}%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
