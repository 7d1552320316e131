"""RecordCache: collapsing, order, eviction, and final results independent of the size."""

from __future__ import annotations

import random

import pytest

from agentstream.tables.cache import MISS, RecordCache
from agentstream.tables.store import MemoryStore


def test_collapses_updates_in_first_write_order() -> None:
    c = RecordCache(max_size=100)
    assert c.put(b"a", b"1") == []
    c.put(b"b", b"1")
    c.put(b"c", b"x")
    c.put(b"a", b"2")
    c.put(b"b", None)
    c.put(b"a", b"3")
    assert len(c) == 3
    view = c.entries()
    assert view == [(b"a", b"3"), (b"b", None), (b"c", b"x")]
    assert len(c) == 3 and c.get(b"a") == (True, b"3")  # a view flushes nothing
    assert c.flush() == view
    assert c.flush() == []
    assert len(c) == 0


def test_get_hit_miss_and_tombstone() -> None:
    c = RecordCache(max_size=10)
    assert c.get(b"a") == (False, None) and c.dirty.get(b"a", MISS) is MISS
    c.put(b"a", b"1")
    c.put(b"d", None)
    assert c.get(b"a") == (True, b"1") and c.dirty.get(b"a", MISS) == b"1"
    assert c.get(b"d") == (True, None) and c.dirty.get(b"d", MISS) is None  # a cached delete is a hit
    c.flush()
    assert c.get(b"a") == (False, None)


def test_evicts_oldest_first_write_when_full() -> None:
    c = RecordCache(max_size=2)
    assert c.put(b"a", b"1") == []
    assert c.put(b"b", b"1") == []
    assert c.put(b"a", b"2") == []  # update: no growth, keeps its (oldest) place
    assert c.put(b"c", b"1") == [(b"a", b"2")]
    assert c.get(b"a") == (False, None)
    assert c.put(b"a", b"3") == [(b"b", b"1")]
    assert c.flush() == [(b"c", b"1"), (b"a", b"3")]


def test_inline_write_then_evict_is_put() -> None:
    """The table partition's inlined put (write ``dirty``, then ``evict()`` when over): same result."""
    inline, put = RecordCache(max_size=2), RecordCache(max_size=2)
    for key in (b"a", b"b", b"a", b"c", b"d"):
        inline.dirty[key] = key
        out = inline.evict() if len(inline.dirty) > inline.max_size else []
        assert out == put.put(key, key)
    assert inline.flush() == put.flush()


def test_size_zero_is_write_through() -> None:
    c = RecordCache(max_size=0)
    assert c.put(b"a", b"1") == [(b"a", b"1")]
    assert c.put(b"a", None) == [(b"a", None)]
    assert c.get(b"a") == (False, None)
    assert len(c) == 0 and c.flush() == []


def test_clear_drops_dirty_entries() -> None:
    c = RecordCache(max_size=5)
    c.put(b"a", b"1")
    c.clear()
    assert c.flush() == [] and c.get(b"a") == (False, None)


def test_negative_size_rejected() -> None:
    with pytest.raises(ValueError):
        RecordCache(max_size=-1)


def _run(max_size: int, seed: int) -> tuple[list[tuple[bytes, bytes]], list[int]]:
    """A read-modify-write workload (counters + deletes) through the cache, committing sometimes.

    Returns final store contents and the values every read observed: both must be the same for
    every cache size, otherwise the cache changed results rather than only timing.
    """
    rng = random.Random(seed)
    store = MemoryStore()
    cache = RecordCache(max_size=max_size)
    observed: list[int] = []

    def write(entries: list[tuple[bytes, object]]) -> None:
        for k, v in entries:
            assert v is None or isinstance(v, bytes)
            store.write_batch([(k, v)])

    for _ in range(3000):
        key = b"k%d" % rng.randrange(40)
        hit, value = cache.get(key)
        if not hit:
            value = store.get(key)
        assert value is None or isinstance(value, bytes)
        count = int(value) if value is not None else 0
        observed.append(count)
        op = rng.random()
        if op < 0.1:
            write(cache.put(key, None))
        else:
            write(cache.put(key, b"%d" % (count + 1)))
        if op > 0.97:  # a commit
            write(cache.flush())
    write(cache.flush())
    return list(store.items()), observed


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_results_do_not_depend_on_cache_size(seed: int) -> None:
    reference = _run(0, seed)
    assert any(reference[0])  # the workload leaves something to compare
    for size in (1, 2, 3, 7, 39, 40, 41, 100, 10_000):
        assert _run(size, seed) == reference, f"max_size={size}"
