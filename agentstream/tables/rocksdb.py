"""RocksDB-backed :class:`~agentstream.tables.store.Store`: one DB directory per table partition.

Design choices (each verified against rocksdict 0.3.29):

* **WAL disabled for every write; durability = :meth:`RocksDBStore.flush`** (memtable -> SST,
  fsynced). This is what Kafka Streams does: the changelog already is the write-ahead log, and a
  checkpoint is only written after ``flush()``, so a crash loses nothing that the changelog replay
  from the checkpoint does not bring back. It makes restore's bulk batches and the per-record path
  equally cheap, with no "bulk mode" to forget to switch off. ``flush()`` is skipped when nothing
  was written since the last one, and ``close()`` flushes.
* **One memory budget for all stores of the process** (``rocksdb_memory_mb``): a shared block
  cache holding index and filter blocks too, and a write-buffer manager charged to it
  (:mod:`~agentstream.tables.rocksdb_memory`).
* **Options are given for the default column family too** (``column_families=``): otherwise
  rocksdict reopens an existing DB with the column-family options saved in its ``OPTIONS`` file,
  each store with a new 8 MB block cache outside the budget.
* **Raw mode** (``Options(raw_mode=True)``): keys/values are stored as given, no pickling. The
  same options are rebuilt by :func:`_options` at every open.
* **Scans use a plain DB iterator**, which RocksDB pins to an implicit snapshot when it is
  created, so ``items()`` creates it eagerly and later writes are not seen. (rocksdict's
  ``Snapshot.items()`` does NOT do this: its iteration sees later writes; only its point reads
  are snapshotted. We don't use it.) ``Rdict.items()`` is not used either: it ends silently at a
  corrupt block; ``RdictIter`` + ``status()`` raises.
* **Open iterators keep the DB LOCK file held after ``Rdict.close()``**, so a reopen in the same
  process fails. Every scan is tracked and released before the DB is closed.
* **An iterator does not own its upper bound**: it reads the bound from the ``ReadOptions`` and
  the bytes it was given, so a scan bounded by a key the caller built and dropped ended wherever
  the reused memory said (found with a join's range scans). Each scan keeps both until it ends.
* rocksdict raises a bare ``Exception`` for RocksDB errors: messages containing ``Corruption``
  become :class:`StoreCorrupt` (caller wipes and restores); anything else, e.g. the LOCK held by
  another process, becomes :class:`StoreUnavailable`, which must NOT lead to a wipe. On
  ``StoreCorrupt`` at open, call :func:`~agentstream.tables.store.destroy_store` and reopen.
"""

from __future__ import annotations

import collections
import os
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import NoReturn

from rocksdict import (
    DbClosedError,
    DBCompressionType,
    Options,
    Rdict,
    RdictIter,
    ReadOptions,
    WriteBatch,
    WriteOptions,
)

from agentstream.exceptions import StoreCorrupt, StoreError, StoreUnavailable
from agentstream.tables.rocksdb_memory import RocksDBMemory, shared_memory
from agentstream.tables.store_files import destroy_store, remove_destroy_leftovers

__all__ = ["L0_COMPACTION_TRIGGER", "MAX_OPEN_FILES", "MEMORY_PROPERTIES", "RocksDBStore"]

MAX_OPEN_FILES = 64
"""SST files one partition's DB keeps open (RocksDB's table cache closes the least recently used
beyond it). A partition holding millions of keys has a few dozen files at most with the memtable
size below; 64 stores stay within a 4096 limit plus sockets."""

L0_COMPACTION_TRIGGER = 8
"""Level-0 files that start a compaction into the next level (RocksDB's default: 4). Table keys
are random, so every level-0 file overlaps the whole next level and each such compaction rewrites
all of it: twice the files per compaction halves how often that level is rewritten (the
large-state case at 3M keys under a 64 MiB budget: compaction CPU 36 s with 4, 16 s with 8; see
docs/performance.md). A point read checks each level-0 file's bloom filter, pinned in the cache;
writes slow down at 20 files, as by default."""

MEMORY_PROPERTIES = (
    ("memtables", "rocksdb.cur-size-all-mem-tables"),
    ("table_readers", "rocksdb.estimate-table-readers-mem"),
    ("block_cache", "rocksdb.block-cache-usage"),
)
"""What :meth:`RocksDBStore.memory_usage` reports: kind -> RocksDB property."""


def _options(memory: RocksDBMemory) -> Options:
    """Options used at every open. Memtables and table format come from the process's memory
    budget (:mod:`~agentstream.tables.rocksdb_memory`); they may differ between opens of one DB
    (a new budget applies to the files written from then on), the rest must not."""
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    opts.set_paranoid_checks(True)
    opts.increase_parallelism(max(2, min(4, os.cpu_count() or 2)))
    opts.set_compression_type(DBCompressionType.lz4())
    opts.set_keep_log_file_num(2)  # RocksDB's info LOG files, not data
    # RocksDB's default (-1) keeps every SST file open for the DB's life: descriptors grow with
    # the state and with the number of partitions. Bounded, least recently used files are closed.
    opts.set_max_open_files(MAX_OPEN_FILES)
    opts.set_level_zero_file_num_compaction_trigger(L0_COMPACTION_TRIGGER)
    # Small memtables (at most 16 MB; default 64 MB): random-key inserts stay cache-friendly and
    # full ones are flushed in the background while writing continues. Measured on 1M random
    # 16-byte keys: ~30-40% faster bulk restore, and flush() at commit has less to write. The
    # shared block cache, with index and bloom filter blocks inside it, and the write-buffer
    # manager bound all stores of the process together (rocksdb_memory_mb).
    memory.apply(opts)
    return opts


def _write_options() -> WriteOptions:
    wo = WriteOptions()
    # The .pyi declares disable_wal as a method; at runtime it is a settable property.
    wo.disable_wal = True  # type: ignore[method-assign,assignment]
    return wo


class _Scan:
    """An ``items()`` iterator that reports corruption and that the store can release on close.

    Built on ``RdictIter`` rather than ``Rdict.items()``: the latter silently ENDS a scan at a
    corrupt block, while ``RdictIter.status()`` raises the error.
    """

    __slots__ = ("__weakref__", "_it", "_path", "_bound")

    def __init__(self, it: RdictIter, path: Path, bound: object = None) -> None:
        self._it: RdictIter | None = it
        self._path = path
        # What the iterator reads its upper bound from: rocksdict 0.3.29 keeps a pointer to the
        # bound's bytes, not a copy, so they must live as long as the iterator does.
        self._bound = bound

    def __iter__(self) -> _Scan:
        return self

    def __next__(self) -> tuple[bytes, bytes]:
        it = self._it
        if it is None:
            raise StoreUnavailable(self._path, "store closed or wiped while a scan was open")
        try:
            if it.valid():
                item: tuple[bytes, bytes] = (it.key(), it.value())
                it.next()
                return item
            it.status()  # raises if the scan stopped on an error rather than at the end
        except Exception as exc:  # rocksdict raises bare Exception
            _raise_translated(exc, self._path, "scan")
        self._it = None
        self._bound = None
        raise StopIteration

    def release(self) -> None:
        self._it = None  # the only reference: the native iterator is freed here
        self._bound = None


CORRUPT_MARK = "agentstream.corrupt"
"""Left in a DB directory when a read or write met corruption while running: the next open of the
store wipes it and restores it from the changelog (RocksDB's open would not notice a bad data block,
and the worker would stop at the same read after every restart)."""
LOCK_SUFFIX = ".lock"  # <partition>.lock beside the partition's DB directory


def _mark_corrupt(path: Path, message: str) -> None:
    try:
        (path / CORRUPT_MARK).write_text(message[:500] + "\n")
    except OSError:  # the directory is gone or unwritable: the error raised says so anyway
        pass


def _raise_translated(exc: Exception, path: Path, op: str) -> NoReturn:
    if isinstance(exc, DbClosedError):
        raise StoreUnavailable(path, f"{op} on a closed store") from exc
    if type(exc) is not Exception:  # TypeError/KeyError from bad arguments: a caller bug
        raise exc
    message = str(exc)
    if op == "open" and "No such file" in message and ("MANIFEST" in message or "CURRENT" in message):
        # a DB file RocksDB's own bookkeeping names is gone: the data is incomplete, not the
        # directory unwritable
        raise StoreCorrupt(path, f"{op} failed, a DB file is missing ({message}); wipe and restore") from exc
    if "Corruption" in message:
        if op != "open":
            _mark_corrupt(path, f"{op}: {message}")
        raise StoreCorrupt(path, f"{op} failed, data is corrupt ({message}); wipe and restore") from exc
    if "lock" in message.lower():
        raise StoreUnavailable(
            path, f"{op} failed: DB is locked, probably by another worker process ({message})"
        ) from exc
    raise StoreError(path, f"{op} failed: {message}") from exc


def _check_bookkeeping(path: Path) -> None:
    """StoreCorrupt when a DB directory has data but its CURRENT file or the MANIFEST it names is
    missing. RocksDB would report the first as a bare I/O error (read as an unwritable data dir)
    and, for the second, could create an empty DB over the old files (a checkpoint would then
    skip restoring them): both are corruption, wiped and restored from the changelog."""
    if not path.is_dir():
        return
    names = set(os.listdir(path))
    if CORRUPT_MARK in names:
        try:
            found = (path / CORRUPT_MARK).read_text("utf-8", "replace").strip()
        except OSError as exc:
            found = str(exc)
        raise StoreCorrupt(path, f"corruption was found while running ({found[:200]}); wipe and restore")
    data = [n for n in names if n.endswith((".sst", ".log")) or n.startswith("MANIFEST-")]
    if "CURRENT" not in names:
        if data:
            raise StoreCorrupt(path, f"the CURRENT file is missing but {len(data)} DB file(s) remain; wipe and restore")
        return
    try:
        manifest = (path / "CURRENT").read_text("ascii", "replace").strip()
    except OSError as exc:
        raise StoreCorrupt(path, f"the CURRENT file is unreadable ({exc}); wipe and restore") from exc
    if not manifest.startswith("MANIFEST-") or manifest not in names:
        raise StoreCorrupt(path, f"CURRENT names {manifest[:60]!r}, which is missing; wipe and restore")


def _take_lock(path: Path) -> int:
    """Lock ``<path>.lock`` (beside the DB directory, so a wipe, which renames the directory away,
    keeps it) for this store's life; StoreUnavailable while another store holds it. Taken before
    anything looks at the directory: a second worker on the same data dir must not find the live
    store corrupt and wipe it."""
    import fcntl  # POSIX only, like the rest of this module's file handling

    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    lock = path.with_name(path.name + LOCK_SUFFIX)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        raise StoreUnavailable(
            path, f"open failed: the store is locked by another worker process or store ({lock}: {exc})"
        ) from exc
    return fd


class RocksDBStore:
    """One RocksDB database holding one table partition.

    ``on_corrupt``: when given, a store found corrupt at open is wiped and reopened empty under the
    store's lock (the callback hears why; the caller restores it from the changelog); without it,
    :class:`StoreCorrupt` is raised. ``memory``: the budget shared with the process's other stores
    (default: :func:`~agentstream.tables.rocksdb_memory.shared_memory` of the default size).
    """

    persistent = True

    def __init__(
        self,
        path: Path,
        on_corrupt: Callable[[StoreCorrupt], None] | None = None,
        memory: RocksDBMemory | None = None,
    ) -> None:
        self._path = Path(path)
        self._memory = memory if memory is not None else shared_memory()
        self._scans: weakref.WeakSet[_Scan] = weakref.WeakSet()
        self._dirty = False
        self._closed = False
        self._lock_fd: int | None = _take_lock(self._path)
        try:
            remove_destroy_leftovers(self._path)
            try:
                self._db = self._open()
            except StoreCorrupt as exc:
                if on_corrupt is None:
                    raise
                on_corrupt(exc)
                destroy_store(self._path)
                self._db = self._open()
        except BaseException:
            self._release_lock()
            raise

    def _release_lock(self) -> None:
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            os.close(fd)  # closing the descriptor releases the flock

    def _open(self) -> Rdict:
        self._path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        _check_bookkeeping(self._path)
        try:
            opts = _options(self._memory)
            # column_families given: without it rocksdict reopens an existing DB with the column
            # family options saved in its OPTIONS file and a new 8 MB block cache of its own, so
            # the budget (cache, memtable size, table format) would hold for new DBs only
            db = Rdict(str(self._path), options=opts, column_families={"default": opts})
        except Exception as exc:
            _raise_translated(exc, self._path, "open")
        db.set_write_options(_write_options())
        self._private_seen: set[str] = set()
        self._make_private()
        return db

    def _make_private(self) -> None:
        """Directory 0700 and files 0600: table contents are readable by this user only.
        (RocksDB creates files with the process umask; new ones are fixed after each flush.)"""
        try:
            os.chmod(self._path, 0o700)
            os.chmod(self._path.parent, 0o700)
            with os.scandir(self._path) as entries:
                for entry in entries:
                    if entry.name not in self._private_seen and entry.is_file(follow_symlinks=False):
                        os.chmod(entry.path, 0o600)
                        self._private_seen.add(entry.name)
        except OSError:  # a file RocksDB just deleted; the next flush catches up
            pass

    @property
    def path(self) -> Path:
        return self._path

    @property
    def memory(self) -> RocksDBMemory:
        """The memory budget this store shares with the process's other stores."""
        return self._memory

    # -- reads / writes: hot path, so no wrapper layers beyond a try ----------------------------

    def get(self, key: bytes) -> bytes | None:
        try:
            value: bytes | None = self._db.get(key)
        except Exception as exc:
            _raise_translated(exc, self._path, "get")
        return value

    def put(self, key: bytes, value: bytes) -> None:
        try:
            self._db.put(key, value)
        except Exception as exc:
            _raise_translated(exc, self._path, "put")
        self._dirty = True

    def delete(self, key: bytes) -> None:
        try:
            self._db.delete(key)
        except Exception as exc:
            _raise_translated(exc, self._path, "delete")
        self._dirty = True

    def write_batch(self, items: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Atomic (one RocksDB WriteBatch): restore and cache flushes land all-or-nothing."""
        batch = WriteBatch(raw_mode=True)
        put, delete = batch.put, batch.delete
        for key, value in items:
            if value is None:
                delete(key)
            else:
                put(key, value)
        try:
            self._db.write(batch)
        except Exception as exc:
            _raise_translated(exc, self._path, "write_batch")
        self._dirty = True

    def write_many(self, keys: Sequence[bytes], values: Sequence[bytes | None]) -> None:
        """:meth:`write_batch` from two columns; without deletes the batch is filled by one
        ``map`` in C (restore's per-record cost is this call, not a Python loop)."""
        if len(keys) != len(values):
            raise ValueError(f"write_many: {len(keys)} keys but {len(values)} values")
        if None in values:
            self.write_batch(zip(keys, values))
            return
        batch = WriteBatch(raw_mode=True)
        collections.deque(map(batch.put, keys, values), 0)
        try:
            self._db.write(batch)
        except Exception as exc:
            _raise_translated(exc, self._path, "write_many")
        self._dirty = True

    def items(self, lo: bytes | None = None, hi: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        """Keys ``lo <= key < hi`` ascending, as of this call (the iterator is created now)."""
        read_opt = ReadOptions()
        if hi is not None:
            read_opt.set_iterate_upper_bound(hi)
        try:
            raw = self._db.iter(read_opt)  # the implicit snapshot is taken here
            if lo is None:
                raw.seek_to_first()
            else:
                raw.seek(lo)
        except Exception as exc:
            _raise_translated(exc, self._path, "scan")
        scan = _Scan(raw, self._path, (read_opt, hi))
        self._scans.add(scan)
        return scan

    def __len__(self) -> int:
        """An ESTIMATE (RocksDB's ``estimate-num-keys``): overwrites and deletes skew it."""
        try:
            n = self._db.property_int_value("rocksdb.estimate-num-keys")
        except Exception as exc:
            _raise_translated(exc, self._path, "len")
        return n or 0

    def memory_usage(self) -> dict[str, int]:
        """Bytes this DB holds in memory, by kind (RocksDB's own figures): ``memtables`` (writes
        not flushed yet), ``table_readers`` (SST indexes and filters), ``block_cache`` (read
        blocks). Empty once closed."""
        if self._closed:
            return {}
        out: dict[str, int] = {}
        for kind, prop in MEMORY_PROPERTIES:
            try:
                value = self._db.property_int_value(prop)
            except Exception:  # a closed or failing DB: no figure rather than an error in a metrics read
                continue
            if value is not None:
                out[kind] = int(value)
        return out

    def __contains__(self, key: object) -> bool:
        return isinstance(key, bytes) and self.get(key) is not None

    def property_int(self, name: str) -> int | None:
        """RocksDB's integer property ``name`` of this DB (``rocksdb.block-cache-usage``, ...), or None."""
        try:
            value: int | None = self._db.property_int_value(name)
        except Exception as exc:
            _raise_translated(exc, self._path, "property")
        return value

    # -- lifecycle -------------------------------------------------------------------------------

    def flush(self) -> None:
        """Write memtables to fsynced SST files; after this, all writes survive a crash."""
        if not self._dirty:
            return
        try:
            self._db.flush(wait=True)
        except Exception as exc:
            _raise_translated(exc, self._path, "flush")
        self._dirty = False
        self._make_private()

    def close(self) -> None:
        if self._closed:
            return
        self._release_scans()
        try:
            self.flush()
        finally:
            self._closed = True
            try:
                self._db.close()
            except DbClosedError:
                pass
            finally:
                self._release_lock()

    def wipe(self) -> None:
        """Close, delete the whole directory (a checkpoint kept inside it too), reopen empty."""
        self._release_scans()
        if not self._closed:
            try:
                self._db.close()
            except Exception:  # closing a DB we are about to delete: failure is irrelevant
                pass
            self._closed = True
        destroy_store(self._path)
        self._dirty = False
        self._db = self._open()
        self._closed = False

    def _release_scans(self) -> None:
        for scan in list(self._scans):
            scan.release()
        self._scans.clear()

    def __repr__(self) -> str:
        return f"RocksDBStore({str(self._path)!r})"
