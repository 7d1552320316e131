"""Issue 45 finding 6 (the table cache): it was bounded by entries only, so 10,000 large values
(per partition) stayed in memory until the commit. It is now bounded in bytes too, and the
entries it writes through early reach the store and changelog whole: nothing is lost."""

from __future__ import annotations

import uuid

import agentstream
from agentstream.tables.partition import CACHE_MAX_BYTES, TablePartition
from agentstream.tables.store import MemoryStore


def _partition(cache_size: int = 10_000) -> tuple[TablePartition, list[tuple[bytes, bytes | None]]]:
    app = agentstream.App(f"cb-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1)
    table = app.Table("t", value_type=str)
    part = TablePartition(table, 0, MemoryStore(), None, cache_size)
    part.activate()
    sent: list[tuple[bytes, bytes | None]] = []
    part.changelog = lambda _part, items: sent.extend(items)
    return part, sent


def test_large_values_are_cached_up_to_the_byte_bound_and_none_is_lost() -> None:
    part, sent = _partition()
    big = 1 << 20  # 1 MB values: 10,000 of them would be 10 GB
    n = 3 * CACHE_MAX_BYTES // big
    for i in range(n):
        part.set(b"k%04d" % i, chr(ord("a") + i % 26) * big)
    held = sum(len(k) + len(v) for k, v in part.cache.entries())
    assert len(part.cache) < n and held <= CACHE_MAX_BYTES * 1.1, (len(part.cache), held)
    assert len(sent) >= n - len(part.cache)  # the rest went to the changelog already
    part.flush_cache()
    part.write_store()
    assert {k for k, _ in sent} == {b"k%04d" % i for i in range(n)}
    for i in range(n):
        found, value = part.get_bytes(b"k%04d" % i)
        assert found and value == chr(ord("a") + i % 26) * big


def test_small_values_keep_the_entry_bound() -> None:
    part, sent = _partition(cache_size=500)
    for i in range(2000):
        part.set(b"k%04d" % (i % 700), "x" * 10)
    assert len(part.cache) == 500 and sent  # table_cache_size still binds small entries
