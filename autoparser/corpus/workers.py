"""One function over many templates, in this process or in worker processes: how corpus-wide jobs (the corpus
report, the nightly job, the live-oracle comparison) spread their work.

    rows = map_templates(collect_one, entries, jobs=2, progress=lambda done, total: ...)
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
from collections.abc import Callable, Sequence
from typing import TypeVar

__all__ = ["map_templates"]

T = TypeVar("T")
R = TypeVar("R")


def map_templates(fn: Callable[[T], R], items: Sequence[T], *, jobs: int = 1, chunksize: int = 1,
                  progress: Callable[[int, int], None] | None = None) -> list[R]:
    """[fn(item) for item in items], in order; jobs > 1 runs them in that many worker processes (`fn` and the
    items must pickle). `progress(done, total)` after each result."""
    out: list[R] = []
    if jobs <= 1 or len(items) <= 1:
        for i, item in enumerate(items, 1):
            out.append(fn(item))
            if progress:
                progress(i, len(items))
        return out
    # spawn: no fork of a process that may hold threads or locks (the hub client's); the worker imports what
    # it needs, and a template's caches live in the worker that handles it
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        for i, result in enumerate(pool.map(fn, items, chunksize=chunksize), 1):
            out.append(result)
            if progress:
                progress(i, len(items))
    return out
