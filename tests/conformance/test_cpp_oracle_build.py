"""The driver's build tree (tools/cpp_oracle build): one tree per llama.cpp tree and cmake version, shared by every
checkout on the machine. A stand-in llama.cpp tree (a `llama` library of one C file) keeps this to a second or two;
the real build is what tox's py3 and cpp-conformance run before their tests."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tools.cpp_oracle import HERE, _cmake, build

pytestmark = pytest.mark.skipif(
    shutil.which("cmake") is None or shutil.which("ninja") is None or shutil.which("cc") is None,
    reason="needs cmake, ninja and a C compiler (tox's py3 installs cmake and ninja)")


def _llama_cpp(root: Path) -> Path:
    """What the driver's CMakeLists.txt needs of a llama.cpp tree to configure: common/chat.h and the two
    libraries it links."""
    (root / "common").mkdir(parents=True)
    (root / "common" / "chat.h").write_text("/* stand-in */\n")
    (root / "llama.c").write_text("int llama_stand_in(void) { return 1; }\n")
    (root / "CMakeLists.txt").write_text("add_library(llama SHARED llama.c)\nadd_library(llama-common STATIC llama.c)\n")
    return root


def _configured_from(build_dir: Path) -> str:
    found = re.search(r"^CMAKE_HOME_DIRECTORY:INTERNAL=(.*)$", (build_dir / "CMakeCache.txt").read_text(), re.M)
    assert found is not None
    return found[1]


def test_a_tree_another_checkout_configured_is_built_not_refused(tmp_path: Path) -> None:
    # CI ran in a clean clone while the user cache held a tree configured from the developer's checkout: cmake
    # refused the clone's folder ("does not match the source ... used to generate cache") and py3 failed at once
    llama_cpp, build_dir = _llama_cpp(tmp_path / "llama.cpp"), tmp_path / "cache" / "build-key"
    other_checkout = tmp_path / "elsewhere" / "cpp_oracle"
    shutil.copytree(HERE, other_checkout, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(["cmake", "-S", str(other_checkout), "-B", str(build_dir), "-G", "Ninja",
                    f"-DLLAMA_CPP_DIR={llama_cpp}"], check=True, capture_output=True)
    binary, _ = _cmake()
    build(llama_cpp, build_dir, 1, ["llama"], binary)
    assert any(build_dir.rglob("libllama.so"))
    # configured from the copy beside the tree, which any checkout writes the same
    assert Path(_configured_from(build_dir)) != other_checkout
    assert (Path(_configured_from(build_dir)) / "oracle.cpp").read_bytes() == (HERE / "oracle.cpp").read_bytes()


def test_building_again_compiles_nothing(tmp_path: Path) -> None:
    # the copied sources are written only where they differ: a rewritten copy would recompile the driver each time
    llama_cpp, build_dir = _llama_cpp(tmp_path / "llama.cpp"), tmp_path / "cache" / "build-key"
    binary, _ = _cmake()
    build(llama_cpp, build_dir, 1, ["llama"], binary)
    copies = sorted(Path(_configured_from(build_dir)).iterdir())
    written = [copy.stat().st_mtime_ns for copy in copies]
    build(llama_cpp, build_dir, 1, ["llama"], binary)
    assert [copy.stat().st_mtime_ns for copy in copies] == written
    assert "no work to do" in subprocess.run(["ninja", "-C", str(build_dir), "-n", "llama"], capture_output=True,
                                             text=True, check=True).stdout
