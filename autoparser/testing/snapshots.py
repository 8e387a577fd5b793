"""syrupy extensions writing one readable file per template and artefact: snapshots/<key>/<artefact file>.

    def test_x(artefact_snapshot):                 # fixture from autoparser.testing.plugin
        artefact_snapshot.check("Qwen3-8B", {"analysis.json": text, "grammar-one-tool.gbnf": gbnf})

The snapshot index (syrupy's `name=`) is "<key>/<file name>"; it alone decides the path, so the layout does
not depend on the test module, function or parameter ids. The file suffix picks the extension class (one per
suffix, as syrupy keys single-file snapshots by extension): `.json` and `.gbnf` here.

Unused snapshots: syrupy relates a snapshot file to a test through the test module's name, which this layout
does not contain. Consequences (syrupy 7.0.2): when pytest gets paths or node ids, syrupy never reports or
deletes any of these files (so an update of a node-id subset keeps its siblings, with or without
`--snapshot-no-cleanup`); on a run without paths it compares every file under snapshots/ with the ones
asserted. Stale template folders are caught by tests/corpus/test_snapshots.py itself in every selection.
"""

from __future__ import annotations

import contextlib
import re
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import pytest
from syrupy.assertion import DiffMode
from syrupy.data import Snapshot, SnapshotCollection, SnapshotCollections
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode
from syrupy.terminal import disable_color

from autoparser.corpus.constrained import CONSUMERS_FILE

if TYPE_CHECKING:
    from syrupy.assertion import SnapshotAssertion
    from syrupy.location import PyTestLocation
    from syrupy.types import SerializableData, SnapshotIndex

__all__ = [
    "SNAPSHOTS_DIRNAME",
    "ArtefactSnapshot",
    "GbnfArtefactExtension",
    "JsonArtefactExtension",
    "TextArtefactExtension",
    "snapshots_root",
]

SNAPSHOTS_DIRNAME = "snapshots"
_ROOT_MARKERS = ("pyproject.toml", "tox.ini", "pytest.ini", "setup.cfg")
_PART = re.compile(r"[A-Za-z0-9._-]+")
# Files of a template's snapshot folder that no test here writes: the consumers' record, written and checked where
# xgrammar and llguidance run (tests/export/test_consumers.py). Never claimed, so never "unused".
_NOT_OURS = frozenset({CONSUMERS_FILE})


def snapshots_root(test_file: str | Path) -> Path:
    """<project>/snapshots for a test file: the project is the nearest parent with a pytest root marker."""
    start = Path(test_file).resolve().parent
    for d in (start, *start.parents):
        if any((d / m).is_file() for m in _ROOT_MARKERS):
            return d / SNAPSHOTS_DIRNAME
    return start / SNAPSHOTS_DIRNAME


def _split_index(index: SnapshotIndex) -> tuple[str, str]:
    """"<key>/<file name>" -> (key, file name); anything else is a programming error in the test."""
    parts = str(index).split("/")
    if len(parts) != 2 or not all(_PART.fullmatch(p) and p not in (".", "..") for p in parts):
        raise ValueError(f"artefact snapshot name must be '<key>/<file name>' with [A-Za-z0-9._-] parts: {index!r}")
    return parts[0], parts[1]


class TextArtefactExtension(SingleFileSnapshotExtension):
    """Base class: a text file at snapshots/<key>/<file name>; subclasses set `file_extension`."""

    _write_mode = WriteMode.TEXT
    file_extension = "txt"
    # Exact bytes: no newline translation, and lone surrogates (undecodable template bytes) survive.
    _errors: ClassVar[str] = "surrogateescape"

    @classmethod
    def dirname(cls, *, test_location: PyTestLocation) -> str:
        return str(snapshots_root(test_location.filepath))

    @classmethod
    def discovery_dirname(cls, *, test_location: PyTestLocation) -> str:
        return cls.dirname(test_location=test_location)

    @classmethod
    def get_snapshot_name(cls, *, test_location: PyTestLocation, index: SnapshotIndex = 0) -> str:
        key, file_name = _split_index(index)
        return f"{key}/{file_name}"

    @classmethod
    def get_file_basename(cls, *, test_location: PyTestLocation, index: SnapshotIndex) -> str:
        key, file_name = _split_index(index)
        return f"{key}/{file_name.removesuffix('.' + cls.file_extension)}"

    @classmethod
    def get_location(cls, *, test_location: PyTestLocation, index: SnapshotIndex) -> str:
        key, file_name = _split_index(index)
        if not file_name.endswith("." + cls.file_extension):
            raise ValueError(f"{cls.__name__} stores .{cls.file_extension} files, not {file_name!r}")
        return str(Path(cls.dirname(test_location=test_location)) / key / file_name)

    @classmethod
    def matches_test_location(cls, *, test_location: PyTestLocation, snapshot_location: str) -> bool:
        # The layout is keyed by template, not by test module: every file of ours belongs to the test asking.
        return cls._owned(Path(cls.dirname(test_location=test_location)), Path(snapshot_location))

    @classmethod
    def _owned(cls, root: Path, path: Path) -> bool:
        return path.parent.parent == root and path.name.endswith("." + cls.file_extension) \
            and path.name not in _NOT_OURS

    def owns_snapshot_collection(self, *, filepath: str, test_location: PyTestLocation) -> bool:
        return self._owned(Path(self.dirname(test_location=test_location)), Path(filepath))

    def discover_snapshots(self, *, test_location: PyTestLocation,
                           ignore_extensions: list[str] | None = None) -> SnapshotCollections:
        # Only our own files, two levels down; anything else in snapshots/ (a README) is never claimed.
        discovered = SnapshotCollections()
        root = Path(self.dirname(test_location=test_location))
        if self.file_extension in (ignore_extensions or ()) or not root.is_dir():
            return discovered
        for path in sorted(root.glob(f"*/*.{self.file_extension}")):
            if path.is_file() and not path.name.startswith(".") and path.name not in _NOT_OURS:
                discovered.add(self.read_snapshot_collection(snapshot_location=str(path)))
        return discovered

    def read_snapshot_collection(self, *, snapshot_location: str) -> SnapshotCollection:
        path = Path(snapshot_location)
        collection = SnapshotCollection(location=snapshot_location)
        collection.add(Snapshot(name=f"{path.parent.name}/{path.name}"))
        return collection

    def read_snapshot_data_from_location(self, *, snapshot_location: str, snapshot_name: str,
                                         session_id: str) -> SerializableData | None:
        try:
            with open(snapshot_location, encoding="utf-8", errors=self._errors, newline="") as f:
                return f.read()
        except FileNotFoundError:
            return None

    @classmethod
    def write_snapshot(cls, *, snapshot_location: str, snapshots: list[tuple[Any, PyTestLocation, SnapshotIndex]],
                       name_order: dict[str, int] | None = None) -> None:
        # syrupy warns when a snapshot name does not start with the test's name; ours are "<key>/<file>" on
        # purpose (the path is the template's, not the test's), and the suite runs with warnings as errors.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"\s*Can not relate snapshot name")
            super().write_snapshot(snapshot_location=snapshot_location, snapshots=snapshots, name_order=name_order)

    @classmethod
    def write_snapshot_collection(cls, *, snapshot_collection: SnapshotCollection,
                                  name_order: dict[str, int] | None = None) -> None:
        data = next(iter(snapshot_collection)).data
        if not isinstance(data, str):
            raise TypeError(f"{cls.__name__} writes text, got {type(data).__name__}")
        with open(snapshot_collection.location, "w", encoding="utf-8", errors=cls._errors, newline="") as f:
            f.write(data)

    def delete_snapshots(self, *, snapshot_location: str, snapshot_names: set[str]) -> None:
        path = Path(snapshot_location)
        path.unlink(missing_ok=True)
        # The template's folder goes with its last file.
        if path.parent.is_dir() and not any(path.parent.iterdir()):
            path.parent.rmdir()


class JsonArtefactExtension(TextArtefactExtension):
    file_extension = "json"


class GbnfArtefactExtension(TextArtefactExtension):
    file_extension = "gbnf"


_EXTENSIONS: dict[str, type[TextArtefactExtension]] = {
    "json": JsonArtefactExtension,
    "gbnf": GbnfArtefactExtension,
}


class ArtefactSnapshot:
    """What the `artefact_snapshot` fixture returns: compares artefact texts with snapshots/<key>/<file>."""

    def __init__(self, snapshot: SnapshotAssertion, *, colors: bool = True, detailed: bool = True) -> None:
        self._snapshot = snapshot
        self._colors = colors  # syrupy's --snapshot-no-colors (set by itself when stdout is not a terminal)
        self._detailed = detailed  # --snapshot-diff-mode
        self._by_ext: dict[str, SnapshotAssertion] = {}

    def __call__(self, key: str, file_name: str) -> SnapshotAssertion:
        """The assertion for one file: `assert text == artefact_snapshot(key, "analysis.json")`."""
        ext = file_name.rpartition(".")[2]
        if ext not in _EXTENSIONS:
            raise ValueError(f"no artefact snapshot extension for {file_name!r} (known: {sorted(_EXTENSIONS)})")
        if ext not in self._by_ext:
            self._by_ext[ext] = self._snapshot.use_extension(_EXTENSIONS[ext])
        return self._by_ext[ext](name=f"{key}/{file_name}")

    def check(self, key: str, artefacts: Mapping[str, str]) -> None:
        """Compare every artefact (all of them, so one failure shows every changed file), then fail with a
        line diff per changed file, each headed by <key>/<file name>."""
        failures: list[str] = []
        for file_name in sorted(artefacts):
            assertion = self(key, file_name)
            matched = assertion == artefacts[file_name]  # == is what records the assertion in syrupy
            if not matched:
                with contextlib.nullcontext() if self._colors else disable_color():
                    diff = assertion.get_assert_diff(diff_mode=DiffMode.DETAILED if self._detailed
                                                     else DiffMode.DISABLED)
                failures.append("\n".join([f"--- snapshot {key}/{file_name} [- snapshot] [+ received]", *diff]))
        if failures:
            pytest.fail(f"{len(failures)} artefact snapshot(s) of {key} changed "
                        "(accept with --snapshot-update):\n" + "\n".join(failures), pytrace=False)
