"""Issue 45 finding 8: corruption and the data dir.

- corruption found while running (a bad data block RocksDB's open cannot notice) marks the store, so
  the next open wipes it and restores it from the changelog instead of stopping at the same read
  after every restart;
- the store's lock is taken before anything looks at the directory: a second worker sharing the data
  dir by mistake is refused, and cannot find the live store "corrupt" and wipe it;
- an app id or table name that is not one directory's name is refused at start, naming it.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

import pytest

import agentstream
from agentstream.exceptions import ConfigError, StoreCorrupt, StoreUnavailable
from agentstream.tables.store import store_for
from agentstream.worker.worker import Worker

from ..restore_checkpoint.test_clean_restart import _run, counting_app


def _make_db(path: Path, n: int = 1000) -> None:
    s = store_for("rocksdb://", path)
    s.write_batch((b"k%04d" % i, os.urandom(100)) for i in range(n))  # incompressible
    s.close()


def _scribble_sst(path: Path, offset: int = 20_000) -> None:
    ssts = [f for f in os.listdir(path) if f.endswith(".sst")]
    assert ssts
    for name in ssts:
        with open(path / name, "r+b") as fh:
            fh.seek(offset)
            fh.write(b"\x00garbage\xff" * 6)


def test_corruption_found_while_running_is_wiped_at_the_next_open(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _make_db(path)
    _scribble_sst(path)  # a data block in the middle: open cannot notice
    heard: list[StoreCorrupt] = []
    s = store_for("rocksdb://", path, on_corrupt=heard.append)
    try:
        with pytest.raises(StoreCorrupt):
            for i in range(1000):
                s.get(b"k%04d" % i)
    finally:
        s.close()
    assert heard == []  # the open itself saw nothing wrong
    # the restart: without the mark, the same read would fail again, after every restart
    s = store_for("rocksdb://", path, on_corrupt=heard.append)
    try:
        assert len(heard) == 1 and "while running" in str(heard[0])
        assert list(s.items()) == []  # wiped: the caller restores it from the changelog
        s.put(b"k", b"v")
        assert s.get(b"k") == b"v"
    finally:
        s.close()
    s = store_for("rocksdb://", path, on_corrupt=heard.append)  # the mark went with the wipe
    try:
        assert len(heard) == 1 and s.get(b"k") == b"v"
    finally:
        s.close()


def test_a_second_store_on_a_live_store_s_directory_is_refused_without_wiping_it(tmp_path: Path) -> None:
    path = tmp_path / "t"
    live = store_for("rocksdb://", path)
    try:
        live.write_batch((b"k%04d" % i, b"v") for i in range(100))
        live.flush()
        # what a second worker may see of a live store mid-change (RocksDB swaps its CURRENT file
        # when it starts a new MANIFEST): without the lock first, this read as corruption, and the
        # corruption path deleted the live store's directory
        current = (path / "CURRENT").read_bytes()
        (path / "CURRENT").unlink()
        wiped: list[StoreCorrupt] = []
        try:
            with pytest.raises(StoreUnavailable):
                store_for("rocksdb://", path, on_corrupt=wiped.append)
        finally:
            (path / "CURRENT").write_bytes(current)
        assert wiped == []
        assert sum(1 for _ in live.items()) == 100 and any(p.suffix == ".sst" for p in path.iterdir())
    finally:
        live.close()
    reopened = store_for("rocksdb://", path)  # the lock went with the close
    try:
        assert reopened.get(b"k0042") == b"v"
    finally:
        reopened.close()


async def test_a_worker_restarted_after_corruption_found_while_running_restores_exact_state(tmp_path: Path) -> None:
    broker, app_id = f"memory://dd-{uuid.uuid4().hex[:8]}", f"dd-{uuid.uuid4().hex[:6]}"
    assert await _run(counting_app(app_id, broker, tmp_path), send=500) == (0, 50)
    parts = sorted((tmp_path / app_id / "tables" / "totals").glob("[0-9]"))
    # corruption found by a read while running leaves the mark (what _raise_translated does)
    (parts[0] / "agentstream.corrupt").write_text("get: Corruption: block checksum mismatch\n")
    restored, keys = await _run(counting_app(app_id, broker, tmp_path))
    assert keys == 50 and restored > 0  # the marked partition came back whole from its changelog
    assert not (parts[0] / "agentstream.corrupt").exists()


@pytest.mark.parametrize(
    ("app_id", "table", "named"),
    [("/x", "totals", "'id'"), ("..", "totals", "'id'"), ("ok", "..", "'Table name'"), ("ok", "a/b", "'Table name'")],
)
async def test_an_id_or_table_name_that_is_not_one_directory_is_refused_at_start(
    tmp_path: Path, app_id: str, table: str, named: str
) -> None:
    data = tmp_path / "data"
    app = agentstream.App(
        app_id,
        broker=f"memory://p-{uuid.uuid4().hex[:8]}",
        store="rocksdb://",
        data_dir=str(data),
        web_enabled=False,
    )
    t = app.Table(table, default=int)

    @app.agent(app.topic("ticks", value_type=int))
    async def tally(stream: agentstream.Stream) -> None:
        async for v in stream:
            t["k"] += v

    worker = Worker(app)
    with pytest.raises(ConfigError) as info:
        await asyncio.wait_for(worker.start(), 10)
    await worker.stop()
    assert str(info.value).startswith(f"setting {named}")
    assert [p.name for p in tmp_path.iterdir()] in ([], ["data"])  # nothing beside the data dir
    assert not any(data.rglob("*.lock"))  # no store was opened
