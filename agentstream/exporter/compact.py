"""Keep a directory of Parquet files holding a table's latest value per key, one file per partition.

``export --follow`` applies each micro-batch of changelog records to ``part-<partition>.parquet``:
the file's rows and the batch's records are merged by key (per window for windowed tables), the
record with the higher changelog offset wins, and a key whose winner is a deletion is dropped. The
merged rows are written to a hidden temporary file next to it and renamed over it (``os.replace``,
atomic on one filesystem), so a reader sees the old file or the new one, never a half-written one.

Merging by offset makes applying a batch idempotent: a batch read again after a crash (Spark replays
the micro-batch that was planned but not committed, with the same offsets) leaves the file as it was.

Runs in the executor that read the partition's records (``mapInArrow`` over the source's one input
partition per Kafka partition), so only that task ever writes a partition's file; the directory must
be reachable from every executor (shared storage on a multi-host cluster).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from .follow_dir import fsync_dir

__all__ = ["merge_latest", "partition_file", "apply_batch", "compactor", "SUMMARY_SCHEMA", "identity_columns"]

SUMMARY_SCHEMA = "partition int, records long, rows long"
"""What each task reports per partition it applied: the batch's records and the file's rows after."""


def partition_file(directory: str | Path, partition: int) -> Path:
    return Path(directory) / f"part-{partition:05d}.parquet"


def identity_columns(names: list[str]) -> list[str]:
    """The columns that identify a row: the key, and the window of windowed tables (start and
    end: a session table's sessions of one key may share a start as they grow)."""
    return ["key"] + [c for c in ("window_start", "window_end") if c in names]


def _hashable(value: Any) -> Any:
    if isinstance(value, (dict, list)):  # struct or array keys: their JSON text
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    return value


def _identities(table: Any, columns: list[str]) -> list[Any]:
    lists = [[_hashable(v) for v in table.column(c).to_pylist()] for c in columns]
    return lists[0] if len(lists) == 1 else list(zip(*lists, strict=True))


def merge_latest(existing: Any, changes: Any, columns: list[str]) -> Any:
    """``existing`` (a pyarrow Table of ``columns``, or None) updated with ``changes`` (``columns``
    plus ``tombstone``; any number of records per key, any order): one row per key, the highest
    offset's, deletions removed. Ordered by offset."""
    import pyarrow as pa  # type: ignore[import-untyped]

    ids = identity_columns(columns)
    winner: dict[Any, tuple[int, int, int]] = {}  # identity -> (offset, source, row); source 0 existing, 1 change
    if existing is not None and existing.num_rows:
        for row, (ident, offset) in enumerate(
            zip(_identities(existing, ids), existing.column("offset").to_pylist(), strict=True)
        ):
            winner[ident] = (offset, 0, row)
    for row, (ident, offset) in enumerate(
        zip(_identities(changes, ids), changes.column("offset").to_pylist(), strict=True)
    ):
        held = winner.get(ident)
        if held is None or offset >= held[0]:
            winner[ident] = (offset, 1, row)
    tombstones = changes.column("tombstone").to_pylist()
    keep_old = sorted(row for _, source, row in winner.values() if source == 0)
    keep_new = sorted(row for _, source, row in winner.values() if source == 1 and not tombstones[row])
    schema = changes.select(columns).schema
    parts = [changes.select(columns).take(pa.array(keep_new, pa.int64()))]
    if existing is not None and keep_old:
        parts.insert(0, existing.select(columns).cast(schema).take(pa.array(keep_old, pa.int64())))
    merged = pa.concat_tables(parts)
    return merged.sort_by("offset") if merged.num_rows else merged


def _write_atomically(table: Any, path: Path) -> None:
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")  # hidden: readers skip dot files
    try:
        pq.write_table(table, str(tmp))
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())  # the rename must not publish a file whose data is not on disk yet
        os.replace(tmp, path)
        fsync_dir(path.parent)  # and the swap must survive a crash (else the old file comes back)
    finally:
        if tmp.exists():
            tmp.unlink()


def apply_batch(directory: str | Path, partition: int, changes: Any, columns: list[str]) -> int:
    """Merge ``changes`` into the partition's file (created if missing); returns its rows after."""
    import pyarrow.parquet as pq

    path = partition_file(directory, partition)
    existing = pq.read_table(str(path)) if path.exists() else None
    merged = merge_latest(existing, changes, columns)
    _write_atomically(merged, path)
    return int(merged.num_rows)


def compactor(directory: str, columns: list[str]) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The ``mapInArrow`` function of a micro-batch: the task's records, grouped by partition (one
    partition per task with the changelog source), applied with :func:`apply_batch`."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        import pyarrow.compute as pc  # type: ignore[import-untyped]

        Path(directory).mkdir(parents=True, exist_ok=True)
        collected = [b for b in batches if b.num_rows]
        if not collected:
            return
        table = pa.Table.from_batches(collected)
        parts, records, rows = [], [], []
        for p in sorted(set(table.column("partition").to_pylist())):
            changes = table.filter(pc.equal(table.column("partition"), p))
            parts.append(p)
            records.append(changes.num_rows)
            rows.append(apply_batch(directory, p, changes, columns))
        yield pa.RecordBatch.from_arrays(
            [pa.array(parts, pa.int32()), pa.array(records, pa.int64()), pa.array(rows, pa.int64())],
            names=["partition", "records", "rows"],
        )

    return run
