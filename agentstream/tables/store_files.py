"""Deleting a store directory crash-safely; below both store kinds (memory and RocksDB), so
:mod:`agentstream.tables.rocksdb` can use it without importing :mod:`agentstream.tables.store`,
which builds a RocksDB store (an import cycle otherwise)."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

__all__ = ["destroy_store", "remove_destroy_leftovers"]


def destroy_store(path: Path) -> None:
    """Delete a store directory, e.g. after :class:`StoreCorrupt` at open; then open it afresh.

    The directory is first renamed away: one atomic step, so a crash mid-delete can never leave
    a half-deleted DB, or a checkpoint kept inside it without its data, under ``path``.
    """
    path = Path(path)
    remove_destroy_leftovers(path)
    if not path.exists():
        return
    doomed = path.with_name(f"{path.name}{_DOOMED}{uuid.uuid4().hex}")
    os.replace(path, doomed)
    _fsync_dir(path.parent)
    shutil.rmtree(doomed, ignore_errors=True)


_DOOMED = ".deleting-"


def remove_destroy_leftovers(path: Path) -> None:
    """Finish deletions a crash interrupted."""
    if not path.parent.is_dir():
        return
    prefix = path.name + _DOOMED
    for entry in path.parent.iterdir():
        if entry.name.startswith(prefix):
            shutil.rmtree(entry, ignore_errors=True)


def _fsync_dir(directory: Path) -> None:
    """Persist a rename/unlink in ``directory``; a no-op where directories can't be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # Windows
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
