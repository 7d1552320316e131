"""Issue 45 finding 5: the status sampler rescanned every changing RocksDB partition every few
seconds (about a second of loop time per million keys). RocksDB stores now keep their key count on
write, exact and stored with the data; only a bulk restore drops it, and one sliced scan adopts it
again. The sampler never scans a store that knows its count."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import agentstream
from agentstream.tables.query import count_keys, key_count
from agentstream.tables.rocksdb import RocksDBStore
from agentstream.testing import AppHarness


def _keys(n: int, prefix: str = "k") -> list[bytes]:
    return [f"{prefix}{i:06d}".encode() for i in range(n)]


def test_the_count_is_exact_through_overwrites_deletes_and_a_reopen(tmp_path: Path) -> None:
    store = RocksDBStore(tmp_path / "p")
    try:
        for _ in range(3):  # each commit rewrites the same keys: RocksDB's estimate counts them again
            store.write_batch((k, b"v") for k in _keys(1000))
            store.flush()
        store.write_batch([(k, None) for k in _keys(100)] + [(b"k000000", b"again"), (b"k000000", None)])
        store.delete(b"absent")
        store.put(b"k000500", b"overwritten")
        store.put(b"new", b"1")
        store.flush()
        assert len(store) == 901
        assert store._db.property_int_value("rocksdb.estimate-num-keys") != 901  # what len() was
        assert sum(1 for _ in store.items()) == 901  # the count's own key is not a table key
    finally:
        store.close()
    reopened = RocksDBStore(tmp_path / "p")
    try:
        assert reopened.count_mark() is None and len(reopened) == 901  # stored with the data: no scan
    finally:
        reopened.close()


def test_a_bulk_write_drops_the_count_until_one_scan_adopts_it(tmp_path: Path) -> None:
    store = RocksDBStore(tmp_path / "p")
    try:
        store.write_many(_keys(500), [b"v"] * 500)
        store.write_many(_keys(500), [b"w"] * 500)  # a changelog holds each key more than once
        mark = store.count_mark()
        assert mark is not None
        scan = store.items()
        store.write_batch([(b"k000001", None), (b"late", b"1")])  # a commit while the scan runs
        assert store.adopt_count(mark, sum(1 for _ in scan))
        assert len(store) == 500 and store.count_mark() is None
        store.write_many([b"x"], [b"1"])  # a restore's tail onto counted keys: counted
        assert len(store) == 501 and store.count_mark() is None
        store.wipe()
        store.write_many(_keys(10), [b"v"] * 10)  # a restore from scratch again
        again = store.count_mark()
        assert again is not None
        assert not store.adopt_count(mark, 123)  # a mark from before a bulk write or a wipe is refused
        store.flush()
    finally:
        store.close()
    reopened = RocksDBStore(tmp_path / "p")
    try:
        assert reopened.count_mark() is not None  # bulk-written since the last count: unknown on disk too
    finally:
        reopened.close()


async def test_the_sampler_scans_no_store_that_knows_its_count(tmp_path: Path) -> None:
    app = agentstream.App(
        f"kc-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1, store="rocksdb://", data_dir=tmp_path
    )
    src = app.topic("src", key_type=str, value_type=int)
    table = app.Table("t", default=int, key_type=str)

    @app.agent(src)
    async def fill(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            table[event.key] += event.value

    async with AppHarness(app, store="rocksdb://", data_dir=tmp_path) as h:
        part = table.parts[0]
        store = part.store
        assert isinstance(store, RocksDBStore)
        scans: list[Any] = []
        real = store.items

        def counting(*args: Any) -> Any:
            scans.append(args)
            return real(*args)

        store.items = counting  # type: ignore[method-assign]
        for round_ in range(3):
            store.write_batch((k, b"1") for k in _keys(20_000, f"r{round_}-"))
            for i in range(30):
                await h.send("src", 1, key=f"w{i % 7}")
            await h.wait_idle()
            await h.web.stats.sample()
            await count_keys(part)
            assert key_count(part) == 20_000 * (round_ + 1) + 7
        status = await h.web.stats.status(history=False)
        assert status["tables"]["t"]["local_keys"] == 60_007
        assert scans == []  # the old sampler read all 60,000 keys every time the partition changed
