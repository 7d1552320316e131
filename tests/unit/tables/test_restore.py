"""Restore on the memory transport: it ends at the fetch high watermark, whatever the polls say.

The slow-broker case against the real broker behind a fault proxy is in
tests/integration/test_kafka_transport.py.
"""

from __future__ import annotations

import asyncio
import logging
import math
from pathlib import Path
from typing import Any

import orjson
import pytest

import agentstream
from agentstream.bulk_gc import BULK_GEN0_THRESHOLD
from agentstream.exceptions import ConfigError, RestoreTimeout
from agentstream.settings import Settings
from agentstream.tables import restore
from agentstream.tables.partition import TablePartition
from agentstream.tables.restore import Restorer
from agentstream.tables.store import store_for
from agentstream.transport.base import TP, TopicSpec
from agentstream.transport.memory import MemoryConsumer, MemoryTransport

TOPIC = "rs-t-changelog"
TP0 = TP(TOPIC, 0)


class SlowConsumer:
    """A memory consumer behind a slow broker: the first ``empty`` polls answer nothing."""

    def __init__(self, inner: MemoryConsumer, empty: int) -> None:
        self.inner = inner
        self.empty = empty

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def getmany(self, *tps: TP, timeout_ms: int = 0, max_records: int | None = None) -> Any:
        if self.empty > 0:
            self.empty -= 1
            return {}
        return await self.inner.getmany(*tps, timeout_ms=timeout_ms, max_records=max_records)


@pytest.fixture
async def transport() -> MemoryTransport:
    MemoryTransport.reset_all()
    t = MemoryTransport("memory://restore-test")
    await t.ensure_topics([TopicSpec(TOPIC, 1, compacted=True)])
    return t


def partition(tmp_path: Path, offset: int | None = None) -> TablePartition:
    app = agentstream.App("rs", broker="memory://restore-test", store="memory://", web_enabled=False)
    table = app.Table("t", default=int)
    part = TablePartition(table, 0, store_for("memory://", tmp_path / "t0"), None, 100)
    part.changelog_offset = offset
    return part


async def fill(transport: MemoryTransport, records: list[tuple[bytes | None, bytes | None]]) -> None:
    producer = transport.producer()
    await producer.start()
    for key, value in records:
        await producer.send(TOPIC, key, value, partition=0)


async def consumer(transport: MemoryTransport) -> MemoryConsumer:
    c = transport.consumer(group_id=None)
    await c.start()
    return c


async def test_empty_polls_mean_wait_restore_ends_at_the_high_watermark(
    transport: MemoryTransport, tmp_path: Path
) -> None:
    await fill(transport, [(b"k%d" % i, b"%d" % i) for i in range(1000)])
    part = partition(tmp_path)
    slow = SlowConsumer(await consumer(transport), empty=5)  # the old restorer gave up after 3
    n = await Restorer(slow, "test", timeout=30).run({TP0: part})  # type: ignore[arg-type]
    assert n == 1000
    assert len(part.store) == 1000 and part.changelog_offset == 1000


async def test_a_restore_without_progress_fails_with_restore_timeout(
    transport: MemoryTransport, tmp_path: Path
) -> None:
    await fill(transport, [(b"k", b"1")])
    slow = SlowConsumer(await consumer(transport), empty=10**9)  # the broker never answers
    with pytest.raises(
        RestoreTimeout,
        match=r"no progress for 0.6s .*rs-t-changelog\[0\] at offset 0 of "
        r"an unknown end \(no fetch was answered\).*restore_timeout",
    ):
        await asyncio.wait_for(Restorer(slow, "test", timeout=0.6).run({TP0: partition(tmp_path)}), 30)  # type: ignore[arg-type]


async def test_null_key_and_undecodable_records_are_skipped_logged_and_counted(
    transport: MemoryTransport, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    good = orjson.dumps(5)
    await fill(transport, [(b"a", good), (None, good), (b"b", b"\xff not json"), (b"c", good), (b"a", None)])
    before = restore.SKIPPED[TOPIC]
    part = partition(tmp_path)
    with caplog.at_level(logging.WARNING, logger="agentstream.tables"):
        n = await Restorer(await consumer(transport), "test").run({TP0: part})
    assert n == 5 and part.changelog_offset == 5
    assert dict(part.store.items()) == {b"c": good}  # "a" was deleted by the tombstone
    assert restore.SKIPPED[TOPIC] - before == 2
    assert f"{TOPIC}[0]@1" in caplog.text and "no key" in caplog.text
    assert f"{TOPIC}[0]@2" in caplog.text and "cannot be decoded" in caplog.text


async def test_a_checkpoint_beyond_the_end_wipes_and_restores_from_zero(
    transport: MemoryTransport, tmp_path: Path
) -> None:
    await fill(transport, [(b"k%d" % i, b"%d" % i) for i in range(10)])
    part = partition(tmp_path, offset=50)  # the changelog was recreated shorter
    part.store.put(b"stale", b"1")
    n = await Restorer(await consumer(transport), "test").run({TP0: part})
    assert n == 10 and part.changelog_offset == 10
    assert b"stale" not in dict(part.store.items()) and len(part.store) == 10


async def test_restore_passes_aborted_transaction_records(transport: MemoryTransport, tmp_path: Path) -> None:
    p = transport.producer(transactional_id="rs-0_0")
    await p.start()
    await p.begin_transaction()
    await p.send(TOPIC, b"a", b"1", partition=0)
    await p.commit_transaction()
    await p.begin_transaction()
    await p.send(TOPIC, b"b", b"2", partition=0)
    await p.abort_transaction()
    c = transport.consumer(group_id=None, isolation_level="read_committed")
    await c.start()
    part = partition(tmp_path)
    await asyncio.wait_for(Restorer(c, "test").run({TP0: part}), 10)
    assert dict(part.store.items()) == {b"a": b"1"} and part.changelog_offset == 2


@pytest.mark.parametrize("bad", [0, -1, math.nan, math.inf])
def test_restore_timeout_setting_is_validated(bad: float) -> None:
    with pytest.raises(ConfigError, match="'restore_timeout'.*Fix: set restore_timeout"):
        Settings(id="x", restore_timeout=bad)


def test_restore_timeout_from_the_environment() -> None:
    assert Settings.build("x", {}, {"AGENTSTREAM_RESTORE_TIMEOUT": "12.5"}).restore_timeout == 12.5


async def test_standby_and_global_following_skip_unusable_changelog_records() -> None:
    """The follower (standby/global table) applies the same filter as restore: never fatal."""
    from agentstream.testing import AppHarness

    app = agentstream.App("follow-skip", broker="memory://", topic_partitions=1, web_enabled=False)
    everything = app.GlobalTable("everything", default=int)

    @app.agent(app.topic("unused", value_type=int))
    async def noop(stream: agentstream.Stream) -> None:
        async for _ in stream:
            pass

    async with AppHarness(app) as h:
        changelog = everything.changelog_topic.name
        before = restore.SKIPPED[changelog]
        producer = app.transport.producer()
        await producer.start()
        for key, value in [
            (b"a", orjson.dumps(1)),
            (None, orjson.dumps(2)),
            (b"b", b"\xff garbage"),
            (b"c", orjson.dumps(3)),
        ]:  # raw str keys: the table key encoding
            await producer.send(changelog, key, value, partition=0)
        for _ in range(250):
            if everything.as_dict() == {"a": 1, "c": 3}:
                break
            await asyncio.sleep(0.02)
        assert everything.as_dict() == {"a": 1, "c": 3}
        assert restore.SKIPPED[changelog] - before == 2
        assert h.worker.crashed is None


# -- the bulk path: a fetched batch checked and written as columns ---------------------------------


class _Msg:
    """A changelog record as a consumer returns it (only what restore reads)."""

    def __init__(self, offset: int, key: Any, value: bytes | None) -> None:
        self.topic, self.partition, self.offset, self.key, self.value = TOPIC, 0, offset, key, value


def test_a_clean_batch_goes_through_whole_tombstones_included(tmp_path: Path) -> None:
    msgs = [_Msg(0, b"a", b"1"), _Msg(1, b"b", None), _Msg(2, b"c", b'{"x": [1, 2]}')]
    before = restore.SKIPPED[TOPIC]
    assert restore.changelog_columns(partition(tmp_path), msgs) == ([b"a", b"b", b"c"], [b"1", None, b'{"x": [1, 2]}'])
    assert restore.SKIPPED[TOPIC] == before


class _Point(agentstream.Record):
    x: int


def test_a_bad_record_anywhere_in_a_batch_is_skipped_alone(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The bulk check must not let a bad value through because its neighbours are good, nor drop
    the good ones: the bad batch goes record by record."""
    tagged = orjson.loads(_Point(x=1).dumps())
    good_tag = orjson.dumps(tagged)
    del tagged["x"]
    bad_tag = orjson.dumps(tagged)  # valid JSON, but the tagged record cannot be built
    msgs = [
        _Msg(0, b"a", b"1"),
        _Msg(1, b"b", b"1,2"),
        _Msg(2, b"c", bad_tag),
        _Msg(3, bytearray(b"d"), b"4"),
        _Msg(4, None, b"5"),
        _Msg(5, b"e", None),
        _Msg(6, b"f", good_tag),
    ]
    before = restore.SKIPPED[TOPIC]
    with caplog.at_level(logging.WARNING, logger="agentstream.tables"):
        keys, values = restore.changelog_columns(partition(tmp_path), msgs)
    assert keys == [b"a", b"e", b"f"] and values == [b"1", None, good_tag]
    assert restore.SKIPPED[TOPIC] - before == 4
    for offset in (1, 2, 3, 4):
        assert f"{TOPIC}[0]@{offset}" in caplog.text
    # a tagged record that cannot be built fails the batch on its own (orjson alone accepts it)
    before = restore.SKIPPED[TOPIC]
    keys, values = restore.changelog_columns(partition(tmp_path), [_Msg(0, b"a", b"1"), _Msg(1, b"c", bad_tag)])
    assert keys == [b"a"] and restore.SKIPPED[TOPIC] - before == 1


@pytest.mark.parametrize("url", ["memory://", "rocksdb://"])
def test_write_many_applies_columns_in_order_with_deletes(url: str, tmp_path: Path) -> None:
    store = store_for(url, tmp_path / "s")
    try:
        store.put(b"gone", b"x")
        store.write_many([b"a", b"b"], [b"1", b"2"])  # the no-delete fast path
        store.write_many([b"a", b"gone", b"b", b"b"], [b"3", None, None, b"4"])
        assert list(store.items()) == [(b"a", b"3"), (b"b", b"4")]
        with pytest.raises(ValueError):
            store.write_many([b"a"], [])
    finally:
        store.close()


async def test_a_failed_restore_leaves_the_heap_unfrozen(transport: MemoryTransport, tmp_path: Path) -> None:
    import gc

    await fill(transport, [(b"k", b"1")])
    c = SlowConsumer(await consumer(transport), empty=10**6)  # never answers: times out
    with pytest.raises(RestoreTimeout):
        await Restorer(c, "test", timeout=0.3).run({TP0: partition(tmp_path)})  # type: ignore[arg-type]
    assert gc.get_freeze_count() == 0 and gc.get_threshold()[0] != BULK_GEN0_THRESHOLD
