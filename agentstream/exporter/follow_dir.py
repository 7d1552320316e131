"""The directory ``export --follow`` maintains: what it holds, and whether it still matches the table.

``DIR/part-<partition>.parquet``: the latest value per key of one changelog partition
(:mod:`.compact`). ``DIR/_agentstream/export.json``: the changelog topic and the decode spec the
files were written with. ``DIR/_agentstream/checkpoint``: Spark's checkpoint of the query (its offset
and commit logs). Names starting with ``_`` or ``.`` are skipped by Parquet readers (Spark, pyarrow,
pandas, DuckDB), so ``DIR`` reads as one Parquet dataset of the table.

A restart reuses the stored decode spec, so the columns never change under a reader (an untyped
table's value column is typed once, from the values there when the export started). If the app was
redeployed with a changed table (another changelog topic, or other declared key/value types), the
directory is refused with the fix instead of mixing two tables' rows.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from .offsets import ExportError
from .schema import TableSpec

__all__ = ["FollowDir", "TableChanged", "NotAFollowDir", "FollowerRunning", "BadExportMeta", "fsync_dir"]

META_DIR = "_agentstream"


class TableChanged(ExportError):
    """The follow directory was written for another version of the table."""


class NotAFollowDir(ExportError):
    """``--out`` holds files that a follow export did not write."""


class FollowerRunning(ExportError):
    """Another ``export --follow`` maintains this directory now."""


class BadExportMeta(ExportError):
    """``_agentstream/export.json`` is empty or not what a follow export writes (a crash on a
    filesystem that lost it, or an edit)."""


def fsync_dir(directory: Path) -> None:
    """Persist the renames in ``directory`` (a crash after ``os.replace`` could otherwise bring
    the old name back); a no-op where directories cannot be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class FollowDir:
    path: Path

    @property
    def meta_dir(self) -> Path:
        return self.path / META_DIR

    @property
    def meta_file(self) -> Path:
        return self.meta_dir / "export.json"

    @property
    def checkpoint(self) -> Path:
        return self.meta_dir / "checkpoint"

    @property
    def lock_file(self) -> Path:
        return self.meta_dir / "follow.lock"

    def lock(self) -> int:
        """Take the directory for this follower (a descriptor; :meth:`unlock` or the process's end
        gives it back). Two followers would overwrite each other's files and Spark checkpoint, so
        a second one is refused with :class:`FollowerRunning`."""
        import fcntl

        self.meta_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            try:
                holder = os.read(fd, 64).decode("ascii", "replace").strip()
            finally:
                os.close(fd)
            raise FollowerRunning(
                f"another `export --follow` (pid {holder or 'unknown'}) maintains {self.path} ({exc.strerror}). "
                "Fix: stop it first, or follow into another --out directory"
            ) from exc
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        return fd

    @staticmethod
    def unlock(fd: int) -> None:
        os.close(fd)  # closing the descriptor releases the lock

    def remove_orphans(self) -> list[Path]:
        """Delete the temporary files a crashed follower left (a partition file or export.json
        being written when it stopped); call with the lock held. Returns what was removed."""
        orphans = [p for p in self.path.glob(".part-*.parquet.*.tmp") if p.is_file()]
        meta_tmp = self.meta_file.with_suffix(".tmp")
        if meta_tmp.is_file():
            orphans.append(meta_tmp)
        for p in orphans:
            p.unlink(missing_ok=True)
        return orphans

    def data_files(self) -> list[Path]:
        return sorted(self.path.glob("part-*.parquet"))

    def check_contents(self) -> None:
        """Refuse a directory holding anything but a follow export's files (a batch export's
        ``part-...-uuid.snappy.parquet`` files would be read as rows of this table)."""
        if not self.path.exists():
            return
        if not self.path.is_dir():
            raise NotAFollowDir(f"--out {self.path} is a file. Fix: pass a directory (new or from an earlier --follow)")
        ours = {p.name for p in self.data_files()} | {META_DIR}
        other = sorted(p.name for p in self.path.iterdir() if p.name not in ours and not p.name.startswith("."))
        if other or (self.data_files() and not self.meta_file.exists()):
            listed = ", ".join(other[:5]) or "part files without _agentstream/export.json"
            raise NotAFollowDir(
                f"--out {self.path} holds files a follow export did not write ({listed}). "
                "Fix: pass a new directory, or one an earlier `export --follow` of this table maintains"
            )

    def settle_spec(self, declared: TableSpec, typed: TableSpec) -> TableSpec:
        """The spec to decode with: the stored one when the directory was started for this same
        table (topic and declared types); ``typed`` (stored now) for a new directory. Raises
        :class:`TableChanged` when the app's table is not the one the directory holds."""
        if self.meta_file.exists():
            meta, stored_declared, stored_spec = self._read_meta()
            if stored_declared.topic != declared.topic:
                raise TableChanged(
                    f"{self.path} follows changelog {stored_declared.topic!r}, but the table's changelog is now "
                    f"{declared.topic!r} (the app was redeployed with a new version or id?). Fix: export to a new "
                    "--out directory (or delete this one to rebuild it from the new changelog)"
                )
            if stored_declared != declared:
                raise TableChanged(
                    f"{self.path} was written for table {declared.table!r} with other key/value types "
                    f"(was key {stored_declared.key['type']}, value {stored_declared.value['type']}; now key "
                    f"{declared.key['type']}, value {declared.value['type']}). Fix: export to a new --out directory "
                    "(or delete this one to rebuild it with the new types)"
                )
            return stored_spec
        self.meta_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.meta_file.with_suffix(".tmp")
        with open(tmp, "wb") as fh:
            fh.write(orjson.dumps({"topic": declared.topic, "declared": declared.dumps(), "spec": typed.dumps()}))
            fh.flush()
            os.fsync(fh.fileno())  # the rename must not publish an empty file after a crash
        os.replace(tmp, self.meta_file)
        fsync_dir(self.meta_dir)
        return typed

    def _read_meta(self) -> tuple[Any, TableSpec, TableSpec]:
        """export.json's content, declared spec and decode spec; BadExportMeta, with the fix, when
        it is empty, not JSON, or not what :meth:`settle_spec` writes."""
        try:
            meta = orjson.loads(self.meta_file.read_bytes())
            return meta, TableSpec.loads(meta["declared"]), TableSpec.loads(meta["spec"])
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
            size = self.meta_file.stat().st_size
            what = "is empty" if size == 0 else f"is not an export's description ({type(exc).__name__}: {exc})"
            raise BadExportMeta(
                f"{self.meta_file} {what}, so the columns {self.path}'s files were written with are unknown. "
                f"Fix: delete {self.path} to rebuild it from the changelog, or export to a new --out directory"
            ) from exc

    def row_counts(self) -> dict[int, int]:
        """Rows per partition file (from the Parquet footers: no data read)."""
        import pyarrow.parquet as pq  # type: ignore[import-untyped]

        out = {}
        for path in self.data_files():
            out[int(path.stem.split("-", 1)[1])] = int(pq.ParquetFile(str(path)).metadata.num_rows)
        return out
