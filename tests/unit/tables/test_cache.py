"""RecordCache: collapsing, order, eviction, and final results independent of the size."""

from __future__ import annotations

import random

import pytest

from agentstream.tables.cache import RecordCache
from agentstream.tables.store import MemoryStore


def test_collapses_updates_in_first_write_order() -> None:
    c: RecordCache[str] = RecordCache(max_size=100)
    assert c.put("t", b"a", b"1") == []
    c.put("t", b"b", b"1")
    c.put("u", b"a", b"x")  # same key, other store: a separate entry
    c.put("t", b"a", b"2")
    c.put("t", b"b", None)
    c.put("t", b"a", b"3")
    assert len(c) == 3
    view = c.flush_view()
    assert view == [("t", b"a", b"3"), ("t", b"b", None), ("u", b"a", b"x")]
    assert len(c) == 3 and c.get("t", b"a") == (True, b"3")  # a view flushes nothing
    assert c.flush() == view == [("t", b"a", b"3"), ("t", b"b", None), ("u", b"a", b"x")]
    assert c.flush() == []
    assert len(c) == 0


def test_get_hit_miss_and_tombstone() -> None:
    c: RecordCache[str] = RecordCache(max_size=10)
    assert c.get("t", b"a") == (False, None)
    c.put("t", b"a", b"1")
    c.put("t", b"d", None)
    assert c.get("t", b"a") == (True, b"1")
    assert c.get("t", b"d") == (True, None)  # a cached delete is a hit: don't ask the store
    assert c.get("u", b"a") == (False, None)
    c.flush()
    assert c.get("t", b"a") == (False, None)


def test_evicts_oldest_first_write_when_full() -> None:
    c: RecordCache[int] = RecordCache(max_size=2)
    assert c.put(0, b"a", b"1") == []
    assert c.put(0, b"b", b"1") == []
    assert c.put(0, b"a", b"2") == []  # update: no growth, keeps its (oldest) place
    assert c.put(0, b"c", b"1") == [(0, b"a", b"2")]
    assert c.get(0, b"a") == (False, None)
    assert c.put(0, b"a", b"3") == [(0, b"b", b"1")]
    assert c.flush() == [(0, b"c", b"1"), (0, b"a", b"3")]


def test_size_zero_is_write_through() -> None:
    c: RecordCache[str] = RecordCache(max_size=0)
    assert c.put("t", b"a", b"1") == [("t", b"a", b"1")]
    assert c.put("t", b"a", None) == [("t", b"a", None)]
    assert c.get("t", b"a") == (False, None)
    assert len(c) == 0 and c.flush() == []


def test_clear_drops_dirty_entries() -> None:
    c: RecordCache[str] = RecordCache(max_size=5)
    c.put("t", b"a", b"1")
    c.clear()
    assert c.flush() == [] and c.get("t", b"a") == (False, None)


def test_negative_size_rejected() -> None:
    with pytest.raises(ValueError):
        RecordCache(max_size=-1)


def _run(max_size: int, seed: int) -> tuple[dict[str, list[tuple[bytes, bytes]]], list[int]]:
    """A read-modify-write workload (counters + deletes) through the cache, committing sometimes.

    Returns final store contents and the values every read observed: both must be the same for
    every cache size, otherwise the cache changed results rather than only timing.
    """
    rng = random.Random(seed)
    stores = {"s0": MemoryStore(), "s1": MemoryStore()}
    cache: RecordCache[str] = RecordCache(max_size=max_size)
    observed: list[int] = []

    def write(entries: list[tuple[str, bytes, bytes | None]]) -> None:
        for sid, k, v in entries:
            stores[sid].write_batch([(k, v)])

    for _ in range(3000):
        sid = rng.choice(("s0", "s1"))
        key = b"k%d" % rng.randrange(40)
        hit, value = cache.get(sid, key)
        if not hit:
            value = stores[sid].get(key)
        count = int(value) if value is not None else 0
        observed.append(count)
        op = rng.random()
        if op < 0.1:
            write(cache.put(sid, key, None))
        else:
            write(cache.put(sid, key, b"%d" % (count + 1)))
        if op > 0.97:  # a commit
            write(cache.flush())
    write(cache.flush())
    return {sid: list(s.items()) for sid, s in stores.items()}, observed


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_results_do_not_depend_on_cache_size(seed: int) -> None:
    reference = _run(0, seed)
    assert any(reference[0].values())  # the workload leaves something to compare
    for size in (1, 2, 3, 7, 39, 40, 41, 100, 10_000):
        assert _run(size, seed) == reference, f"max_size={size}"
