"""Byte-level key/value stores holding ONE table partition, plus offset checkpoint files.

Everything here deals in already-serialised ``bytes``; codecs, changelogs and restore live above.

Durability contract (shared by every store, mirrors Kafka Streams): writes are NOT durable until
:meth:`Store.flush` returns. Whoever writes a checkpoint must call ``store.flush()`` first, so a
checkpoint never claims more than the disk holds; anything after it is replayed from the changelog.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from agentstream.exceptions import ConfigError, StoreCorrupt
from agentstream.settings import ROCKSDB_MEMORY_DEFAULT_MB
from agentstream.tables.store_files import _fsync_dir, destroy_store, remove_destroy_leftovers

__all__ = [
    "MemoryStore",
    "Store",
    "delete_checkpoint",
    "destroy_store",
    "remove_destroy_leftovers",
    "persistent_store",
    "read_checkpoint",
    "store_for",
    "write_checkpoint",
]

logger = logging.getLogger(__name__)


@runtime_checkable
class Store(Protocol):
    """One table partition's key/value data, keys and values as bytes.

    ``items(lo, hi)`` yields ``lo <= key < hi`` in ascending byte order from a snapshot taken
    when ``items`` is called: later writes are not seen. ``len()`` is exact for memory stores and
    an *estimate* for RocksDB (exact counting would be a full scan).
    """

    persistent: bool
    """True when data survives a restart, i.e. a checkpoint for this store means something."""

    @property
    def path(self) -> Path: ...

    def get(self, key: bytes) -> bytes | None: ...

    def put(self, key: bytes, value: bytes) -> None: ...

    def delete(self, key: bytes) -> None: ...

    def write_batch(self, items: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Apply puts (and deletes, value None) all-or-nothing, in order."""

    def write_many(self, keys: Sequence[bytes], values: Sequence[bytes | None]) -> None:
        """:meth:`write_batch` of ``zip(keys, values)`` given as two columns: bulk writers (restore)
        hand over a fetched batch without building a pair per record."""

    def items(self, lo: bytes | None = None, hi: bytes | None = None) -> Iterator[tuple[bytes, bytes]]: ...

    def __len__(self) -> int: ...

    def __contains__(self, key: object) -> bool: ...

    def flush(self) -> None:
        """Make every write so far durable; call before writing a checkpoint."""

    def wipe(self) -> None:
        """Drop all data (the store stays open and usable, empty)."""

    def close(self) -> None:
        """Flush and release the store; idempotent."""


class MemoryStore:
    """A dict: the ``memory://`` store, for tests and tables rebuilt from the changelog at start."""

    persistent = False

    def __init__(self, path: Path | None = None) -> None:
        self._path = Path(path) if path is not None else Path("memory")
        self._data: dict[bytes, bytes] = {}

    @property
    def path(self) -> Path:
        return self._path

    def get(self, key: bytes) -> bytes | None:
        return self._data.get(key)

    def put(self, key: bytes, value: bytes) -> None:
        self._data[key] = value

    def delete(self, key: bytes) -> None:
        self._data.pop(key, None)

    def write_batch(self, items: Iterable[tuple[bytes, bytes | None]]) -> None:
        # Materialise first so an exception inside the caller's iterable leaves us untouched.
        batch = list(items)
        data = self._data
        for key, value in batch:
            if value is None:
                data.pop(key, None)
            else:
                data[key] = value

    def write_many(self, keys: Sequence[bytes], values: Sequence[bytes | None]) -> None:
        if len(keys) != len(values):
            raise ValueError(f"write_many: {len(keys)} keys but {len(values)} values")
        if None in values:
            self.write_batch(zip(keys, values))
        else:
            self._data.update(zip(keys, values))  # type: ignore[arg-type]  # no None among the values

    def items(self, lo: bytes | None = None, hi: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        # Sorting copies, which is also what makes the scan a snapshot.
        keys = sorted(k for k in self._data if (lo is None or k >= lo) and (hi is None or k < hi))
        data = self._data
        return iter([(k, data[k]) for k in keys])

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def flush(self) -> None:
        """Nothing to do: memory is as durable as it gets."""

    def wipe(self) -> None:
        self._data.clear()

    def close(self) -> None:
        self._data = {}


def persistent_store(url: str) -> bool:
    """Whether the ``store`` setting names a store that outlives the worker (its data dir)."""
    scheme, sep, _ = url.partition("://")
    return bool(sep) and scheme.lower() == "rocksdb"


def store_for(
    url: str,
    path: Path,
    on_corrupt: Callable[[StoreCorrupt], None] | None = None,
    *,
    memory_mb: int = ROCKSDB_MEMORY_DEFAULT_MB,
) -> Store:
    """Build the store named by the ``store`` setting (``memory://`` or ``rocksdb://``).

    ``on_corrupt``: a persistent store found corrupt at open is wiped under its lock and opened
    empty, after this callback hears why (see :class:`~agentstream.tables.rocksdb.RocksDBStore`).
    ``memory_mb``: the ``rocksdb_memory_mb`` setting; every RocksDB store of the process opened
    with it shares its one block cache and write-buffer manager."""
    scheme, sep, _ = url.partition("://")
    scheme = scheme.lower()
    if sep and scheme == "memory":
        return MemoryStore(path)
    if sep and scheme == "rocksdb":
        from agentstream.tables.rocksdb import RocksDBStore  # import lazily: native dependency
        from agentstream.tables.rocksdb_memory import shared_memory

        return RocksDBStore(path, on_corrupt, shared_memory(memory_mb))
    raise ConfigError(
        "store",
        f"unsupported store URL {url!r}",
        "use 'memory://' (tables rebuilt from the changelog at every start) or 'rocksdb://'",
    )


# -- checkpoints ---------------------------------------------------------------------------------


def read_checkpoint(path: Path) -> int | None:
    """The offset recorded at ``path``; None when missing or unreadable (restore from scratch)."""
    try:
        text = Path(path).read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        logger.warning("checkpoint %s unreadable (%s); restoring from the start", path, exc)
        return None
    try:
        stripped = text.decode("ascii").strip()
        if not stripped.isdigit():  # rejects "", "-1", "+1", "1e3", " 1 2"
            raise ValueError(stripped)
        return int(stripped)
    except ValueError:
        logger.warning("checkpoint %s unreadable (content %r); restoring from the start", path, text[:40])
        return None


def write_checkpoint(path: Path, offset: int) -> None:
    """Record ``offset`` at ``path`` atomically: a crash leaves the old or the new value, never junk.

    The caller must have flushed the store first (see the module docstring).
    """
    if offset < 0:
        raise ValueError(f"checkpoint offset must be >= 0, got {offset}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # this user only, like the store
    os.fchmod(fd, 0o600)  # also when a stale .tmp existed with other modes
    with os.fdopen(fd, "wb") as fh:
        fh.write(b"%d\n" % offset)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def delete_checkpoint(path: Path) -> None:
    """Remove a checkpoint durably (e.g. under exactly-once while the store is being written)."""
    path = Path(path)
    try:
        path.unlink()
    except FileNotFoundError:
        return
    _fsync_dir(path.parent)
