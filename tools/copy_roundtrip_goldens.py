#!/usr/bin/env python3
"""Copy the C++ round-trip goldens into tests/data/roundtrip/, trimmed to what the tests read.

Rerunnable: `python tools/copy_roundtrip_goldens.py [SHARED_DIR]` (default ../shared, then /work/shared).
Tests must never read the shared folder at run time, so they read these copies. The prompt, grammar and
triggers the C++ produced are dropped (the round-trip tests only compare parsed messages and outputs), which
keeps the files small; what remains is gzipped JSON lines, one file per golden set, rows in golden order.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEST = ROOT / "tests" / "data" / "roundtrip"
SETS = ("seed", "packages", "hub")
KEEP = ("set", "template", "scenario", "request", "output", "intended", "expected_from_output", "output_has",
        "oracle_matches_output_expectation", "failure_class")
# The render fields say how the golden generator shaped the output (the tests compare our generator's choices).
RENDER_KEEP = ("args_form", "reasoning_key", "id_style", "eot_suffix", "suffix_stripped")


def trim(row: dict[str, Any]) -> dict[str, Any]:
    out = {k: row[k] for k in KEEP if k in row}
    out["render"] = {k: row["render"][k] for k in RENDER_KEEP if k in row.get("render", {})}
    out["oracle"] = {"parsed": (row.get("oracle") or {}).get("parsed")}
    return out


def main(argv: list[str]) -> int:
    candidates = [Path(argv[1])] if len(argv) > 1 else [ROOT.parent / "shared", Path("/work/shared")]
    shared = next((p for p in candidates if (p / "conformance").is_dir()), None)
    if shared is None:
        print(f"no shared folder among {[str(p) for p in candidates]}", file=sys.stderr)
        return 2
    DEST.mkdir(parents=True, exist_ok=True)
    for name in SETS:
        src = shared / "conformance" / f"roundtrip_{name}.jsonl"
        rows = [trim(json.loads(line)) for line in src.read_text(encoding="utf-8").splitlines() if line.strip()]
        dest = DEST / f"roundtrip_{name}.jsonl.gz"
        # key order kept: a schema's property order decides the argument order of XML-style tool calls
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        # mtime=0 keeps the gzip bytes identical across reruns, so an unchanged golden gives no diff.
        with open(dest, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
            f.write(text.encode("utf-8"))
        print(f"{dest.relative_to(ROOT)}: {len(rows)} rows, {dest.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
