"""Issue 15 items 7 and 10 (stores): a missing MANIFEST or CURRENT is corruption (wipe and
restore), never "unwritable data dir"; store directories, files and checkpoints are private."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from agentstream.exceptions import StoreCorrupt
from agentstream.tables.rocksdb import RocksDBStore
from agentstream.tables.store import destroy_store, write_checkpoint


def _db(path: Path) -> None:
    s = RocksDBStore(path)
    s.write_batch((b"k%04d" % i, b"v") for i in range(500))
    s.close()


@pytest.mark.parametrize("victim", ["MANIFEST-", "CURRENT"])
def test_missing_bookkeeping_file_is_corruption(tmp_path: Path, victim: str) -> None:
    path = tmp_path / "t"
    _db(path)
    for name in os.listdir(path):
        if name.startswith(victim):
            os.remove(path / name)
    with pytest.raises(StoreCorrupt) as info:
        RocksDBStore(path)
    assert "missing" in str(info.value)
    destroy_store(path)
    s = RocksDBStore(path)
    try:
        assert list(s.items()) == []
    finally:
        s.close()


def test_missing_current_without_a_log_file_does_not_open_an_empty_db(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _db(path)
    for name in os.listdir(path):
        if name == "CURRENT" or name.endswith(".log"):
            os.remove(path / name)
    with pytest.raises(StoreCorrupt):  # else RocksDB would start empty over the old SST files
        RocksDBStore(path)


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_store_files_directories_and_checkpoints_are_private(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        path = tmp_path / "app" / "tables" / "t" / "0"
        s = RocksDBStore(path)
        s.put(b"k", b"v")
        s.flush()
        assert _mode(path) == 0o700 and _mode(path.parent) == 0o700
        files = [p for p in path.iterdir() if p.is_file()]
        assert files and all(_mode(p) == 0o600 for p in files), {p.name: oct(_mode(p)) for p in files}
        s.close()
        cp = path / "agentstream.checkpoint"
        write_checkpoint(cp, 42)
        assert _mode(cp) == 0o600
    finally:
        os.umask(old)
