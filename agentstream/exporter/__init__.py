"""Export tables to Spark: a table's changelog read as a DataFrame, or written to files.

Install with ``pip install 'agentstream[spark]'`` (pyspark, pandas<3, pyarrow) and Java 17+.
Nothing is downloaded at run time: the changelog is read by a PySpark *Python* data source
(``agentstream_changelog``, :mod:`.source`) with aiokafka, one Spark partition per Kafka
partition, up to the partition ends taken when the read starts (:mod:`.offsets`).

Columns of :func:`~.spark.read_changelog` / ``agentstream export``:

``key``
    the table key. Typed when the table declares ``key_type`` (str -> string, int -> long,
    a Record -> struct, ...); for untyped keys (Faust's raw keys, the default) the UTF-8 text
    of the key bytes. Windowed tables: the logical key, not the store's composite key.
``window_start``, ``window_end`` (windowed tables only)
    Spark ``timestamp`` (UTC instants); ``window_end = window_start + size`` (end exclusive).
    Session tables (``table.session(gap)``): one row per key and session, ``window_start`` and
    ``window_end`` the times of its first and last record (both inclusive).
``value``
    typed where the type is known: the declared ``value_type`` (a Record -> a struct of its
    fields), a scalar ``default`` (``default=int`` -> long), or the Record that the ``__faust``
    tag of the newest values names (sampled by the driver, :mod:`.sample`); else the value's JSON
    text. Null only for tombstones (all versions).
``partition``, ``offset``, ``timestamp``
    where the value was read from, and the changelog record's timestamp (``timestamp``).

:func:`~.spark.read_changelog_stream` is the changelog as a Structured Streaming source, and
:func:`~.follow.follow_table` (``agentstream export --follow``) keeps a directory of Parquet files
holding the latest values as the table changes.

This package imports neither pyspark nor aiokafka until used, so the CLI and type checks work
without the extra.
"""

from __future__ import annotations

from typing import Any

from .offsets import ChangelogNotFound, ExportError, PartitionRange
from .runtime import JavaNotFound, SparkNotInstalled, check_java, check_pyspark

__all__ = [
    "ChangelogNotFound",
    "ExportError",
    "JavaNotFound",
    "PartitionRange",
    "SparkNotInstalled",
    "check_java",
    "check_pyspark",
    "export_table",
    "follow_table",
    "read_changelog",
    "read_changelog_stream",
    "spark_session",
]


def __getattr__(name: str) -> Any:
    if name in ("read_changelog", "read_changelog_stream", "export_table", "spark_session"):
        from . import spark

        return getattr(spark, name)
    if name == "follow_table":
        from .follow import follow_table

        return follow_table
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
