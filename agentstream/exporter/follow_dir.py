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

import orjson

from .offsets import ExportError
from .schema import TableSpec

__all__ = ["FollowDir", "TableChanged", "NotAFollowDir"]

META_DIR = "_agentstream"


class TableChanged(ExportError):
    """The follow directory was written for another version of the table."""


class NotAFollowDir(ExportError):
    """``--out`` holds files that a follow export did not write."""


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
            meta = orjson.loads(self.meta_file.read_bytes())
            stored_declared = TableSpec.loads(meta["declared"])
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
            return TableSpec.loads(meta["spec"])
        self.meta_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.meta_file.with_suffix(".tmp")
        tmp.write_bytes(orjson.dumps({"topic": declared.topic, "declared": declared.dumps(), "spec": typed.dumps()}))
        os.replace(tmp, self.meta_file)
        return typed

    def row_counts(self) -> dict[int, int]:
        """Rows per partition file (from the Parquet footers: no data read)."""
        import pyarrow.parquet as pq  # type: ignore[import-untyped]

        out = {}
        for path in self.data_files():
            out[int(path.stem.split("-", 1)[1])] = int(pq.ParquetFile(str(path)).metadata.num_rows)
        return out
