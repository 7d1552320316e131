"""Read a table's changelog into a Spark DataFrame, and export it to files.

.. code-block:: python

    from agentstream.exporter.spark import read_changelog, spark_session

    spark = spark_session("local[*]")
    df = read_changelog(spark, "apps.wordcount", "word_counts")     # the table as of now
    df.write.parquet("/tmp/word_counts")

Columns: ``key``, (windowed tables) ``window_start``, ``window_end``, ``value``, ``partition``,
``offset``, ``timestamp`` -- see :mod:`agentstream.exporter` for their types. The offsets read
are fixed when :func:`read_changelog` is called, so every action on the DataFrame sees the same
snapshot; the reading and the latest-value computation run in Spark's executors.

Any SparkSession works, including ``SparkSession.builder...getOrCreate()``: before the source is
registered, a local session's Python workers are pointed at this interpreter (``spark.pyspark.python``
wins when set; see :func:`.runtime.prepare_session`). On a cluster (any master but ``local``)
agentstream and the app's module are shipped to the executors as a zip (:mod:`.deploy`); their
Python (``spark.pyspark.python``) must have the dependencies (aiokafka, orjson, pyarrow, pandas).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from ..exceptions import ConfigError
from .offsets import PartitionRange, snapshot_ranges
from .runtime import prepare_session, spark_session
from .sample import typed_spec
from .schema import TableSpec, table_spec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from ..app import App
    from ..tables.table import Table

__all__ = [
    "read_changelog",
    "export_table",
    "register",
    "spark_session",
    "resolve_table",
    "app_modules",
    "read_changelog_stream",
    "changelog_stream_frame",
    "FORMATS",
]

FORMATS = ("parquet", "csv", "json")
CSV_OPTIONS = {"header": "true", "escape": '"'}
"""RFC 4180 quoting (``""`` inside quotes), not Spark's default backslash escapes."""
ProgressFn = Callable[[str], None]


def register(spark: SparkSession, modules: Iterable[str] = ()) -> None:
    """Register the ``agentstream_changelog`` data source with ``spark`` (idempotent), after
    pointing the session's Python workers at an interpreter that can run it (:func:`prepare_session`)
    and, on a cluster (any master but ``local``), shipping agentstream and ``modules`` (the app's) to
    the executors (:func:`.deploy.ship_code`)."""
    from .datasource import ChangelogDataSource

    if getattr(spark, "_agentstream_source", False):
        return
    prepare_session(spark)
    if not (spark.sparkContext.master or "local").startswith("local"):
        from .deploy import ship_code

        ship_code(spark, modules)
    spark.dataSource.register(ChangelogDataSource)
    spark._agentstream_source = True  # type: ignore[attr-defined]


def app_modules(spec: App | str, app: App) -> list[str]:
    """The module that declares the app (``-A package.module``): shipped to a cluster's executors so
    that codecs and types the app defines unpickle there."""
    if isinstance(spec, str):
        return [spec.partition(":")[0]]
    declared_in = getattr(app, "_declared_in", None)
    return [declared_in] if isinstance(declared_in, str) and declared_in != "__main__" else []


def _load_app(app: App | str) -> App:
    if isinstance(app, str):
        from ..app_loader import load_app

        return load_app(app)
    return app


def resolve_table(app: App, table: Table | Any | str) -> Table:
    """A Table from a name, a Table, or a WindowedTable (its underlying table)."""
    if isinstance(table, str):
        found = app.tables.get(table)
        if found is None:
            raise ConfigError(
                "table",
                f"app {app.id!r} has no table {table!r} (tables: {', '.join(app.tables) or 'none'})",
                "pass the name given to app.Table(...)",
            )
        return found  # type: ignore[no-any-return]
    inner = getattr(table, "table", None)
    resolved: Table = inner if inner is not None and hasattr(table, "window") else table
    return resolved


def bootstrap_servers(app: App, broker: str | None = None) -> list[str]:
    """host:port list of ``broker`` (a kafka:// URL) or of the app's broker setting."""
    from ..transport.kafka import parse_kafka_url

    return parse_kafka_url(broker or app.settings.broker)


def read_changelog(
    spark: SparkSession,
    app: App | str,
    table: Table | Any | str,
    *,
    latest: bool = True,
    broker: str | None = None,
    ranges: Iterable[PartitionRange] | None = None,
    progress: ProgressFn | None = None,
) -> DataFrame:
    """The table ``table`` of ``app`` (an App or ``"module[:attr]"``) as a DataFrame.

    ``latest=True``: one row per key (per window for windowed tables), the last value by offset
    in its partition; keys whose last record is a tombstone are gone -- the table as of the
    read. ``latest=False``: every changelog record, tombstones included (``value`` null).
    ``ranges`` pins the offsets (default: every partition from its start to its end now);
    ``progress`` gets one line per partition describing what will be read.
    """
    the_app = _load_app(app)
    the_table = resolve_table(the_app, table)
    spec = table_spec(the_table)
    servers = bootstrap_servers(the_app, broker)
    planned = list(ranges) if ranges is not None else snapshot_ranges(servers, spec.topic)
    spec = typed_spec(the_table, spec, servers, planned)  # untyped values: typed by their __faust tags
    if progress is not None:
        for r in planned:
            progress(f"{spec.topic}[{r.partition}]: offsets {r.start}..{r.end} ({r.span} records to read)")
    return changelog_frame(spark, spec, servers, planned, latest=latest, modules=app_modules(app, the_app))


def changelog_frame(
    spark: SparkSession,
    spec: TableSpec,
    servers: list[str],
    planned: list[PartitionRange],
    *,
    latest: bool = True,
    modules: Iterable[str] = (),
) -> DataFrame:
    """The DataFrame of :func:`read_changelog` from an already computed spec and offsets."""
    from pyspark.sql import functions as F

    register(spark, modules)
    df = (
        spark.read.format("agentstream_changelog")
        .option("bootstrap.servers", ",".join(servers))
        .option("topic", spec.topic)
        .option("spec", spec.dumps())
        .option("ranges", orjson.dumps([[r.partition, r.start, r.end] for r in planned]).decode())
        .option("bookkeeping", "true" if latest else "false")  # raw_key/tombstone: for the latest values only
        .load()
    )
    columns = [c for c in df.columns if c not in ("raw_key", "tombstone")]
    if latest:
        # The last record per (partition, changelog key): a hash aggregate, no sort or shuffle of
        # whole rows beyond one struct per key. The changelog key includes the window start.
        last = F.max_by(F.struct(*columns, "tombstone"), "offset").alias("last")
        df = df.groupBy("partition", "raw_key").agg(last).select("last.*").where(~F.col("tombstone"))
    return df.select(*columns)


def changelog_stream_frame(
    spark: SparkSession,
    spec_json: str,
    servers: list[str],
    topic: str,
    *,
    bookkeeping: bool = False,
    max_records: int | None = None,
) -> DataFrame:
    """The streaming DataFrame of a changelog from an already computed spec (as JSON)."""
    register(spark)
    reader = (
        spark.readStream.format("agentstream_changelog")
        .option("bootstrap.servers", ",".join(servers))
        .option("topic", topic)
        .option("spec", spec_json)
        .option("bookkeeping", "true" if bookkeeping else "false")
    )
    if max_records is not None:
        reader = reader.option("max.records.per.batch", str(max_records))
    return reader.load()


def read_changelog_stream(
    spark: SparkSession,
    app: App | str,
    table: Table | Any | str,
    *,
    broker: str | None = None,
    max_records_per_batch: int | None = None,
) -> DataFrame:
    """The table's changelog as a streaming DataFrame: every record from the log start, then each
    new one as the app writes it.

    Columns as :func:`~.spark.read_changelog` with ``latest=False`` (``value`` null for a
    deletion). Start it with a ``checkpointLocation`` to resume where it stopped after a restart.
    """
    the_app = _load_app(app)
    the_table = resolve_table(the_app, table)
    spec = table_spec(the_table)
    servers = bootstrap_servers(the_app, broker)
    spec = typed_spec(the_table, spec, servers, snapshot_ranges(servers, spec.topic))
    return changelog_stream_frame(spark, spec.dumps(), servers, spec.topic, max_records=max_records_per_batch)


def _csv_ready(df: DataFrame) -> DataFrame:
    """CSV holds flat scalar columns only: struct values become ``value_<field>`` columns, and
    arrays/maps/nested structs their JSON text."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, BinaryType, MapType, StructType

    out = []
    for field in df.schema.fields:
        if isinstance(field.dataType, StructType):
            for sub in field.dataType.fields:
                col = F.col(f"`{field.name}`.`{sub.name}`")
                if isinstance(sub.dataType, (StructType, ArrayType, MapType)):
                    col = F.to_json(col)
                out.append(col.alias(f"{field.name}_{sub.name}"))
        elif isinstance(field.dataType, (ArrayType, MapType)):
            out.append(F.to_json(F.col(field.name)).alias(field.name))
        elif isinstance(field.dataType, BinaryType):
            out.append(F.base64(F.col(field.name)).alias(field.name))
        else:
            out.append(F.col(field.name))
    return df.select(*out)


def export_table(
    app: App | str,
    table: Table | Any | str,
    out: str | Path,
    *,
    fmt: str = "parquet",
    master: str = "local[*]",
    latest: bool = True,
    broker: str | None = None,
    spark: SparkSession | None = None,
    progress: ProgressFn | None = print,
    conf: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Write the table to ``out`` (a directory, replaced) as parquet, csv or json.

    Prints (via ``progress``) one line per partition before the read -- offsets and records to
    read -- and one per partition after it, with the rows written. Returns a summary dict.
    Without ``spark``, a session for ``master`` (with ``conf``) is started once the table and its
    changelog's offsets are known (so a wrong table or broker fails fast) and left running.

    The rows per partition are counted by the executors while they write (a Spark observation),
    not by reading ``out`` back: on a cluster, ``out`` is written by the executors and must be
    storage they all reach (HDFS, S3, NFS...), but the driver never reads it.
    """
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    if fmt not in FORMATS:
        raise ConfigError("format", f"unknown export format {fmt!r}", f"use one of {', '.join(FORMATS)}")
    say: ProgressFn = progress or (lambda line: None)
    started = time.monotonic()
    the_app = _load_app(app)
    the_table = resolve_table(the_app, table)
    spec = table_spec(the_table)
    servers = bootstrap_servers(the_app, broker)
    planned = snapshot_ranges(servers, spec.topic)
    spec = typed_spec(the_table, spec, servers, planned)  # untyped values: typed by their __faust tags
    for r in planned:
        say(f"partition {r.partition}: offsets {r.start}..{r.end}, {r.span} records to read")
    if spark is None:
        say(f"starting Spark ({master}; starting the JVM takes a few seconds) ...")
        with _ticking(say, "starting Spark"):
            session = spark_session(master, conf=conf)
        say(f"Spark started in {time.monotonic() - started:.1f}s (application {session.sparkContext.applicationId})")
    else:
        session = spark
    df = changelog_frame(session, spec, servers, planned, latest=latest, modules=app_modules(app, the_app))
    observation = Observation("agentstream_export_rows")
    df = df.observe(
        observation,
        F.count(F.lit(1)).alias("rows"),
        *(F.count_if(F.col("partition") == r.partition).alias(f"p{r.partition}") for r in planned),
    )
    if fmt == "csv":
        df = _csv_ready(df)
    path = str(out)
    writer = df.write.mode("overwrite")
    if fmt == "csv":
        writer = writer.options(**CSV_OPTIONS)
    say(
        f"reading {sum(r.span for r in planned)} changelog records from {len(planned)} partitions and "
        f"writing {fmt} to {path} ..."
    )
    with _ticking(say, "reading and writing"):
        getattr(writer, fmt)(path)
    observed = observation.get
    counts = {r.partition: int(observed.get(f"p{r.partition}", 0)) for r in planned}
    for r in planned:
        say(f"partition {r.partition}: {counts[r.partition]} rows written (offsets {r.start}..{r.end})")
    total = int(observed.get("rows", sum(counts.values())))
    seconds = time.monotonic() - started
    say(
        f"exported {spec.table} ({'latest values' if latest else 'all versions'}): {total} rows from "
        f"{sum(r.span for r in planned)} changelog records to {path} ({fmt}) in {seconds:.1f}s"
    )
    return {
        "table": spec.table,
        "topic": spec.topic,
        "rows": total,
        "records": sum(r.span for r in planned),
        "partitions": {r.partition: {"start": r.start, "end": r.end, "rows": counts[r.partition]} for r in planned},
        "path": path,
        "format": fmt,
        "seconds": seconds,
        "application_id": session.sparkContext.applicationId,
    }


@contextlib.contextmanager
def _ticking(say: ProgressFn, what: str, every: float = 5.0) -> Iterator[None]:
    """A line every ``every`` seconds while a blocking Spark call runs (the CLI is not silent for a
    minute). A helper thread of the exporter's command-line tool; no worker runs here."""
    done = threading.Event()
    started = time.monotonic()

    def tick() -> None:
        while not done.wait(every):
            say(f"  ... {what} ({time.monotonic() - started:.0f}s)")

    thread = threading.Thread(target=tick, name="agentstream-export-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
