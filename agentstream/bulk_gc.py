"""Garbage collection tuned for work in bulk: a worker process (:func:`worker_gc`, set by
``agentstream worker`` at start-up) and a bulk read (:func:`bulk_gc`: a table restore, an export task).

A process-wide policy, so one module below everything that uses it (the CLI, tables' restore, the
Spark exporter's partition reader, the benchmark's worker runner): it imports nothing of agentstream's.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["bulk_gc", "worker_gc", "BULK_GEN0_THRESHOLD", "WORKER_THRESHOLDS"]

BULK_GEN0_THRESHOLD = 50_000  # allocations between young collections during a bulk read (default 700)
WORKER_THRESHOLDS = (50_000, 20, 100)  # a worker's collector thresholds (CPython's default: 700, 10, 10)


def worker_gc() -> None:
    """A worker allocates a few short-lived objects per record: move what start-up created out of
    the collector's way (``gc.freeze()``) and collect the young generation less often. Called once,
    after the app is loaded and before the worker runs."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*WORKER_THRESHOLDS)


_bulk = 0  # bulk reads running with bulk_gc (several may overlap on one event loop)
_saved_threshold: tuple[int, int, int] | None = None
_froze = False  # whether the outermost bulk read froze the heap (so it unfreezes it)


@contextlib.contextmanager
def bulk_gc() -> Iterator[None]:
    """Garbage collection for a bulk read (a restore, an export task), while it runs.

    A bulk read allocates a record object per changelog record. At the default thresholds that
    means a young collection every 700 objects and, every so often, a full collection walking the
    whole heap: in a worker (app, libraries, caches) that was the whole gap left against a bare
    rocksdict loop. So, while the outermost bulk read runs: the objects that exist at its start
    are frozen (``gc.freeze()``: they are in use, not garbage), so a full collection walks only
    what the read allocated; and the young generation is collected every
    :data:`BULK_GEN0_THRESHOLD` allocations. Both are undone when the last overlapping read ends.
    A heap frozen before (:func:`worker_gc`) stays frozen: the process froze it, not this read."""
    global _bulk, _saved_threshold, _froze
    if _bulk == 0:
        _froze = gc.get_freeze_count() == 0
        if _froze:
            gc.freeze()
        _saved_threshold = gc.get_threshold()
        first, *rest = _saved_threshold
        gc.set_threshold(max(first, BULK_GEN0_THRESHOLD), *rest)
    _bulk += 1
    try:
        yield
    finally:
        _bulk -= 1
        if _bulk == 0:
            if _saved_threshold is not None:
                gc.set_threshold(*_saved_threshold)
                _saved_threshold = None
            if _froze:
                gc.unfreeze()
                _froze = False
