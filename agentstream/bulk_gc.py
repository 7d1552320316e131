"""Garbage collection tuned for a bulk read (a table restore, an export task) while it runs.

A process-wide policy, so one module below everything that reads in bulk (tables' restore, the
Spark exporter's partition reader): it imports nothing of agentstream's.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["bulk_gc", "BULK_GEN0_THRESHOLD"]

BULK_GEN0_THRESHOLD = 50_000  # allocations between young collections during a bulk read (default 700)

_bulk = 0  # bulk reads running with bulk_gc (several may overlap on one event loop)
_saved_threshold: tuple[int, int, int] | None = None


@contextlib.contextmanager
def bulk_gc() -> Iterator[None]:
    """Garbage collection for a bulk read (a restore, an export task), while it runs.

    A bulk read allocates a record object per changelog record. At the default thresholds that
    means a young collection every 700 objects and, every so often, a full collection walking the
    whole heap: in a worker (app, libraries, caches) that was the whole gap left against a bare
    rocksdict loop. So, while the outermost bulk read runs: the objects that exist at its start
    are frozen (``gc.freeze()``: they are in use, not garbage), so a full collection walks only
    what the read allocated; and the young generation is collected every
    :data:`BULK_GEN0_THRESHOLD` allocations. Both are undone when the last overlapping read ends."""
    global _bulk, _saved_threshold
    if _bulk == 0:
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
            gc.unfreeze()
