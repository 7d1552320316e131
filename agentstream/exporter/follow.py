"""``agentstream -A app export TABLE --out DIR --follow``: keep DIR's Parquet holding the table's latest values.

A Structured Streaming query over the changelog (:mod:`.stream`) whose every micro-batch is applied
to one Parquet file per changelog partition by the executors that read it (:mod:`.compact`: merged by
offset, swapped in atomically). Spark's checkpoint (``DIR/_agentstream/checkpoint``) holds the offsets
of the batches applied, so a restart resumes after the last committed batch without re-reading the
changelog; a batch that was planned but not committed (a crash) is read again and applied again, which
changes nothing (merging by offset is idempotent). SIGINT and SIGTERM stop the query between steps
and the session, and the command exits 0.

One line per micro-batch: its records per partition, the lag per partition when it finished (the
broker's end then minus the batch's end: what the app wrote while the batch ran), the batch's time and
the rows DIR holds.
"""

from __future__ import annotations

import re
import signal
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import orjson

from .compact import SUMMARY_SCHEMA, compactor
from .follow_dir import FollowDir
from .offsets import ExportError, snapshot_ranges
from .stream_offsets import StreamOffset, lag

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from ..app import App

__all__ = ["follow_table", "progress_line"]

ProgressFn = Callable[[str], None]


def progress_line(
    batch: int, records: dict[int, int], seconds: float, lags: dict[int, int] | None, rows: int, out: str
) -> str:
    """``batch 3: 120 records (p0 40, p2 80) in 0.84s; lag p0=0 p1=0 p2=0 p3=0; 5100 rows in DIR``."""
    per = ", ".join(f"p{p} {n}" for p, n in sorted(records.items()) if n)
    lag_text = " ".join(f"p{p}={n}" for p, n in sorted(lags.items())) if lags else "unknown"
    return (
        f"batch {batch}: {sum(records.values())} records{f' ({per})' if per else ''} in {seconds:.2f}s; "
        f"lag {lag_text}; {rows} rows in {out}"
    )


class _Batches:
    """What the micro-batches applied (written by foreachBatch, read by the progress listener)."""

    def __init__(self, rows: dict[int, int]) -> None:
        self.lock = threading.Lock()
        self.rows = dict(rows)  # partition -> rows in its file
        self.records: dict[int, dict[int, int]] = {}  # batch id -> partition -> records applied

    def applied(self, batch_id: int, summary: Iterable[Any]) -> None:
        with self.lock:
            got = {}
            for r in summary:
                got[int(r["partition"])] = int(r["records"])
                self.rows[int(r["partition"])] = int(r["rows"])
            self.records[batch_id] = got

    def take(self, batch_id: int) -> tuple[dict[int, int] | None, int]:
        with self.lock:
            return self.records.pop(batch_id, None), sum(self.rows.values())


def _listener(batches: _Batches, servers: list[str], topic: str, out: str, say: ProgressFn) -> Any:
    from pyspark.sql.streaming.listener import StreamingQueryListener

    class Progress(StreamingQueryListener):  # type: ignore[misc]
        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            p = event.progress
            records, rows = batches.take(int(p.batchId))
            if records is None:
                return  # no data in this trigger: no batch ran, nothing to say
            lags = None
            if p.sources and p.sources[0].endOffset:
                end = StreamOffset.from_json(orjson.loads(p.sources[0].endOffset), topic=topic)
                try:  # the broker's ends now, after the batch: what the app wrote meanwhile is the lag
                    latest = {r.partition: r.end for r in snapshot_ranges(servers, topic, timeout=5.0)}
                except ExportError:
                    latest = None
                lags = None if latest is None else lag(end, latest)
            seconds = (p.durationMs or {}).get("triggerExecution", 0) / 1000
            say(progress_line(int(p.batchId), records, seconds, lags, rows, out))

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            pass

    return Progress()


def _apply(out: str, columns: list[str], batches: _Batches) -> Callable[[DataFrame, int], None]:
    def apply(batch_df: DataFrame, batch_id: int) -> None:
        summary = batch_df.mapInArrow(compactor(out, columns), SUMMARY_SCHEMA).collect()
        batches.applied(batch_id, summary)

    return apply


class _Stop:
    """SIGINT/SIGTERM -> stop the query (restored on exit: the caller's handlers come back)."""

    def __init__(self, say: ProgressFn) -> None:
        self.event = threading.Event()
        self.say = say
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> _Stop:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if not self.event.is_set():
            self.say(f"{signal.Signals(signum).name}: stopping after the running step ...")
        self.event.set()

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)


def follow_table(
    app: App | str,
    table: Any,
    out: str | Path,
    *,
    master: str = "local[*]",
    broker: str | None = None,
    spark: SparkSession | None = None,
    interval: float = 1.0,
    max_records_per_batch: int | None = None,
    conf: dict[str, str] | None = None,
    progress: ProgressFn | None = print,
    stop: threading.Event | None = None,
) -> dict[str, Any]:
    """Keep ``out`` holding the table's latest values until SIGINT/SIGTERM (or ``stop`` is set).

    Returns a summary: the table, its changelog topic and the rows ``out`` holds at the end."""
    from .sample import typed_spec
    from .schema import table_spec
    from .spark import (
        _load_app,
        _ticking,
        app_modules,
        bootstrap_servers,
        changelog_stream_frame,
        register,
        resolve_table,
        spark_session,
    )

    say: ProgressFn = progress or (lambda line: None)
    the_app = _load_app(app)
    the_table = resolve_table(the_app, table)
    declared = table_spec(the_table)
    servers = bootstrap_servers(the_app, broker)
    directory = FollowDir(Path(out).resolve())
    directory.check_contents()
    lock = directory.lock()  # one follower per directory; before touching anything in it
    try:
        for orphan in directory.remove_orphans():
            say(f"removed {orphan.name}, left by a follower that stopped while writing it")
        planned = snapshot_ranges(servers, declared.topic)  # fails fast: broker down, no changelog
        spec = directory.settle_spec(declared, typed_spec(the_table, declared, servers, planned))
        resumed = (directory.checkpoint / "offsets").exists()
        say(
            f"following {declared.topic} ({len(planned)} partitions) into {directory.path}: "
            + ("resuming from its checkpoint" if resumed else "from the start of the changelog")
        )
        if spark is None:
            say(f"starting Spark ({master}; starting the JVM takes a few seconds) ...")
            with _ticking(say, "starting Spark"):
                session = spark_session(master, app_name=f"agentstream-follow-{declared.table}", conf=conf)
            own_session = True
        else:
            session, own_session = spark, False

        register(session, modules=app_modules(app, the_app))
        df = changelog_stream_frame(
            session, spec.dumps(), servers, spec.topic, bookkeeping=True, max_records=max_records_per_batch
        )
        columns = [c for c in df.columns if c not in ("raw_key", "tombstone")]
        batches = _Batches(directory.row_counts())
        listener = _listener(batches, servers, spec.topic, str(directory.path), say)
        session.streams.addListener(listener)
        stop_event = stop or threading.Event()
        started = time.monotonic()
        query = None
        stopping = False
        jvm_alive = True
        try:
            with _Stop(say) as signals:
                query = (
                    df.writeStream.queryName(f"agentstream-follow-{declared.table}")
                    .foreachBatch(_apply(str(directory.path), columns, batches))
                    .option("checkpointLocation", str(directory.checkpoint))
                    .trigger(processingTime=f"{max(0.1, interval)} seconds")
                    .start()
                )
                while query.isActive and not (signals.event.is_set() or stop_event.is_set()):
                    query.awaitTermination(1)
                stopping = signals.event.is_set() or stop_event.is_set()
                failure = None if stopping else query.exception()
                query.stop()
                if failure is not None:
                    raise ExportError(f"the follow query failed: {_first_line(failure)}")
        except Exception as exc:
            if not stopping or isinstance(exc, ExportError):
                raise
            # The signal reached Spark's JVM too (a process group stopped at once): it is gone, and
            # with it the running batch; the checkpoint holds the last committed one.
            say(f"Spark stopped before the query did ({type(exc).__name__}); the next run resumes from the checkpoint")
            jvm_alive = False
        finally:
            if jvm_alive:
                session.streams.removeListener(listener)
                if own_session:
                    session.stop()
        total = sum(directory.row_counts().values())
        say(
            f"stopped after {time.monotonic() - started:.1f}s; {directory.path} holds {total} rows "
            "(run the same command to resume)"
        )
        return {
            "table": spec.table,
            "topic": spec.topic,
            "rows": total,
            "path": str(directory.path),
        }

    finally:
        directory.unlock(lock)


def _first_line(exc: Any) -> str:
    """The agentstream error inside Spark's wrapped failure (it carries the fix), else its first line."""
    text = str(getattr(exc, "desc", None) or exc)
    ours = re.search(r"agentstream\.[\w.]+\.(\w+): ([^\n]+)", text)
    if ours:
        return f"{ours.group(1)}: {ours.group(2)}"
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[0] if lines else repr(exc)
