"""Both stores must behave the same; RocksDB additionally persists, detects corruption, locks."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentstream.exceptions import ConfigError, StoreCorrupt, StoreError, StoreUnavailable
from agentstream.tables.rocksdb import RocksDBStore
from agentstream.tables.store import (
    MemoryStore,
    Store,
    delete_checkpoint,
    destroy_store,
    read_checkpoint,
    store_for,
    write_checkpoint,
)


@pytest.fixture(params=["memory", "rocksdb"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    s = store_for(f"{request.param}://", tmp_path / "table-0")
    yield s
    s.close()


def test_store_for_picks_by_scheme(tmp_path: Path) -> None:
    assert isinstance(store_for("memory://", tmp_path / "m"), MemoryStore)
    r = store_for("rocksdb://", tmp_path / "r")
    try:
        assert isinstance(r, RocksDBStore)
        assert isinstance(r, Store)
    finally:
        r.close()


@pytest.mark.parametrize("url", ["redis://", "rocksdb", "", "file:///x"])
def test_store_for_bad_scheme_names_setting(url: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        store_for(url, tmp_path / "x")
    assert info.value.setting == "store"


def test_get_put_delete_contains(store: Store) -> None:
    assert store.get(b"k") is None
    assert b"k" not in store
    store.put(b"k", b"v1")
    store.put(b"k", b"v2")
    assert store.get(b"k") == b"v2"
    assert b"k" in store
    store.put(b"empty", b"")  # an empty value is a value, not a delete
    assert store.get(b"empty") == b"" and b"empty" in store
    store.delete(b"k")
    store.delete(b"never-there")  # deleting a missing key is fine
    assert store.get(b"k") is None and b"k" not in store


def test_write_batch_applies_in_order_with_deletes(store: Store) -> None:
    store.put(b"gone", b"x")
    store.write_batch([(b"a", b"1"), (b"b", b"2"), (b"a", b"3"), (b"gone", None), (b"b", None), (b"b", b"4")])
    assert list(store.items()) == [(b"a", b"3"), (b"b", b"4")]


def test_write_batch_is_all_or_nothing_when_iterable_fails(store: Store) -> None:
    def items() -> Iterator[tuple[bytes, bytes | None]]:
        yield b"a", b"1"
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        store.write_batch(items())
    assert store.get(b"a") is None


def test_items_sorted_bounded_and_snapshot(store: Store) -> None:
    keys = [bytes([i]) + b"\x00\xff" for i in (5, 0, 255, 7, 1)]
    for k in keys:
        store.put(k, k[::-1])
    assert [k for k, _ in store.items()] == sorted(keys)
    assert [k for k, _ in store.items(lo=b"\x01", hi=b"\x07\x00\xff")] == [
        b"\x01\x00\xff",
        b"\x05\x00\xff",
    ]
    scan = store.items()
    first = next(scan)
    store.put(b"\x06", b"new")  # after the scan started: must not be seen
    store.put(b"\x07\x00\xff", b"changed")
    store.delete(b"\xff\x00\xff")
    rest = list(scan)
    assert [first, *rest] == [(k, k[::-1]) for k in sorted(keys)]


def test_a_scan_bounded_by_a_computed_key_reads_to_that_key(store: Store) -> None:
    """The upper bound of a scan is a key the caller built and then dropped: the scan still ends
    there, not where whatever reuses its memory says (rocksdict 0.3.29 keeps a pointer to it)."""
    keys = [b"K%06d" % i for i in range(500)]
    store.write_many(keys, [b""] * len(keys))
    for _ in range(20):
        scan = store.items(b"K" + b"%06d" % 10, b"K" + b"%06d" % 400)  # both keys freed after the call
        litter = [b"\x00" * 7 + bytes([j & 1]) for j in range(2000)]  # reuses the freed memory
        assert [k for k, _ in scan] == keys[10:400]
        del litter


def test_len_and_wipe(store: Store) -> None:
    store.write_batch((b"%03d" % i, b"v") for i in range(100))
    assert len(store) == 100  # exact for memory; the estimate is exact for fresh distinct puts
    store.wipe()
    assert list(store.items()) == []
    assert store.get(b"001") is None
    store.put(b"after", b"wipe")  # still usable
    assert store.get(b"after") == b"wipe"


def test_rocksdb_persists_across_reopen(tmp_path: Path) -> None:
    path = tmp_path / "t-1"
    s = RocksDBStore(path)
    s.write_batch((b"k%d" % i, b"v%d" % i) for i in range(1000))
    s.delete(b"k5")
    s.close()
    s.close()  # idempotent
    s = RocksDBStore(path)
    try:
        assert s.get(b"k999") == b"v999"
        assert s.get(b"k5") is None
        assert sum(1 for _ in s.items()) == 999
    finally:
        s.close()


def test_rocksdb_writes_skip_the_wal_and_flush_makes_them_durable(tmp_path: Path) -> None:
    s = RocksDBStore(tmp_path / "t")
    try:
        s.write_batch((b"k%d" % i, b"x" * 100) for i in range(1000))
        wal = [f for f in os.listdir(s.path) if f.endswith(".log")]
        assert all(os.path.getsize(s.path / f) == 0 for f in wal)
        assert not any(f.endswith(".sst") for f in os.listdir(s.path))
        s.flush()
        assert any(f.endswith(".sst") for f in os.listdir(s.path))
    finally:
        s.close()


def test_rocksdb_open_scan_does_not_block_reopen(tmp_path: Path) -> None:
    path = tmp_path / "t"
    s = RocksDBStore(path)
    s.write_batch([(b"a", b"1"), (b"b", b"2")])
    scan = s.items()
    next(scan)
    s.close()
    with pytest.raises(StoreUnavailable):
        next(scan)  # the scan was released, not silently truncated
    s2 = RocksDBStore(path)  # would fail on the LOCK if the native iterator were still alive
    try:
        assert s2.get(b"b") == b"2"
    finally:
        s2.close()


def test_rocksdb_closed_store_raises_unavailable(tmp_path: Path) -> None:
    s = RocksDBStore(tmp_path / "t")
    s.close()
    with pytest.raises(StoreUnavailable):
        s.get(b"a")


def test_rocksdb_second_open_of_same_path_is_unavailable_not_corrupt(tmp_path: Path) -> None:
    s = RocksDBStore(tmp_path / "t")
    try:
        with pytest.raises(StoreUnavailable):
            RocksDBStore(tmp_path / "t")
    finally:
        s.close()


def _make_db(path: Path) -> None:
    s = RocksDBStore(path)
    s.write_batch((b"k%04d" % i, os.urandom(100)) for i in range(1000))  # incompressible
    s.close()


def _scribble(path: Path, name_part: str, offset: int) -> None:
    hit = [f for f in os.listdir(path) if f.startswith(name_part) or f.endswith(name_part)]
    assert hit
    for name in hit:
        with open(path / name, "r+b") as fh:
            fh.seek(offset, os.SEEK_SET if offset >= 0 else os.SEEK_END)
            fh.write(b"\x00garbage\xff" * 6)


@pytest.mark.parametrize(
    ("victim", "offset"),
    [("CURRENT", 0), ("MANIFEST-", 0), (".sst", -60)],  # -60: sst footer
)
def test_rocksdb_corrupt_files_raise_store_corrupt_then_destroy_recovers(
    tmp_path: Path, victim: str, offset: int
) -> None:
    path = tmp_path / "t"
    _make_db(path)
    _scribble(path, victim, offset)
    with pytest.raises(StoreCorrupt) as info:
        RocksDBStore(path)
    assert str(path) in str(info.value)
    assert isinstance(info.value, StoreError)
    destroy_store(path)
    s = RocksDBStore(path)
    try:
        assert s.get(b"k0001") is None and list(s.items()) == []
    finally:
        s.close()


def test_rocksdb_corrupt_data_block_raises_on_read_and_scan(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _make_db(path)
    _scribble(path, ".sst", 20_000)  # a data block in the middle: open cannot notice
    s = RocksDBStore(path)
    try:
        with pytest.raises(StoreCorrupt):
            # rocksdict's own items() would just stop early here, as if the data ended
            sum(1 for _ in s.items())
        bad = 0
        for i in range(1000):
            try:
                s.get(b"k%04d" % i)
            except StoreCorrupt:
                bad += 1
        assert bad > 0
    finally:
        s.close()


def test_rocksdb_missing_current_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _make_db(path)
    os.remove(path / "CURRENT")
    with pytest.raises(StoreCorrupt):
        RocksDBStore(path)


def test_rocksdb_wipe_removes_directory_contents(tmp_path: Path) -> None:
    path = tmp_path / "t"
    s = RocksDBStore(path)
    try:
        s.put(b"a", b"1")
        write_checkpoint(path / "offset", 42)
        s.wipe()
        assert read_checkpoint(path / "offset") is None  # checkpoint inside the dir went too
        assert s.get(b"a") is None
        # nothing left beside it but the store's lock, which the wipe keeps held
        assert sorted(p.name for p in tmp_path.iterdir()) == ["t", "t.lock"]
    finally:
        s.close()


def test_interrupted_destroy_leftovers_are_removed_on_open(tmp_path: Path) -> None:
    leftover = tmp_path / "t.deleting-abc"
    leftover.mkdir()
    (leftover / "000001.sst").write_bytes(b"x")
    (tmp_path / "other.deleting-abc").mkdir()  # another store's: not ours to touch
    RocksDBStore(tmp_path / "t").close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.deleting-abc", "t", "t.lock"]


# -- checkpoints ---------------------------------------------------------------------------------


def test_checkpoint_roundtrip_and_missing(tmp_path: Path) -> None:
    cp = tmp_path / "sub" / "offset"
    assert read_checkpoint(cp) is None
    write_checkpoint(cp, 0)
    assert read_checkpoint(cp) == 0
    write_checkpoint(cp, 123456789012)
    assert read_checkpoint(cp) == 123456789012
    assert sorted(p.name for p in cp.parent.iterdir()) == ["offset"]  # no tmp file left
    delete_checkpoint(cp)
    delete_checkpoint(cp)
    assert read_checkpoint(cp) is None


def test_checkpoint_rejects_negative(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        write_checkpoint(tmp_path / "offset", -1)


@pytest.mark.parametrize("junk", [b"", b"abc", b"-5\n", b"12 34", b"\xff\xfe", b"1e3"])
def test_unreadable_checkpoint_reads_none_and_warns(
    tmp_path: Path, junk: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    cp = tmp_path / "offset"
    cp.write_bytes(junk)
    with caplog.at_level(logging.WARNING):
        assert read_checkpoint(cp) is None
    assert "unreadable" in caplog.text


def test_checkpoint_that_is_a_directory_reads_none(tmp_path: Path) -> None:
    (tmp_path / "offset").mkdir()
    assert read_checkpoint(tmp_path / "offset") is None


def test_checkpoint_write_is_atomic_when_interrupted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cp = tmp_path / "offset"
    write_checkpoint(cp, 7)

    def crash(*args: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        write_checkpoint(cp, 8)
    assert read_checkpoint(cp) == 7  # the old value survives a failure before the rename
