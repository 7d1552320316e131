"""bulk_gc: the GC policy of a bulk read holds exactly while one runs (nested, failing)."""

from __future__ import annotations

import gc

import pytest

from agentstream.bulk_gc import BULK_GEN0_THRESHOLD, WORKER_THRESHOLDS, bulk_gc, worker_gc


def test_bulk_gc_holds_only_while_restores_run_nested_or_failing() -> None:
    threshold = gc.get_threshold()
    assert gc.get_freeze_count() == 0
    with bulk_gc():
        frozen = gc.get_freeze_count()
        assert frozen > 0 and gc.get_threshold()[0] == BULK_GEN0_THRESHOLD
        with bulk_gc():  # an overlapping restore
            pass
        assert gc.get_freeze_count() > 0  # the first one still runs: still frozen (frozen objects may die meanwhile)
        assert gc.get_threshold()[0] == BULK_GEN0_THRESHOLD
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == threshold
    with pytest.raises(RuntimeError):
        with bulk_gc():
            raise RuntimeError("restore failed")
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == threshold


def test_a_bulk_read_leaves_the_workers_frozen_start_up_heap_frozen() -> None:
    """`agentstream worker` freezes its start-up heap (worker_gc); a restore ending must not thaw it
    (full collections would walk the whole app and library heap again)."""
    threshold = gc.get_threshold()
    try:
        worker_gc()
        frozen = gc.get_freeze_count()
        assert frozen > 0 and gc.get_threshold() == WORKER_THRESHOLDS
        with bulk_gc():
            assert gc.get_threshold()[0] == max(BULK_GEN0_THRESHOLD, WORKER_THRESHOLDS[0])
        assert gc.get_freeze_count() > 0  # still frozen after the read (not thawed: frozen objects may die)
        assert gc.get_threshold() == WORKER_THRESHOLDS
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)
