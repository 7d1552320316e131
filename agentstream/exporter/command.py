"""``agentstream -A MODULE export TABLE --out PATH [--follow]``: the export command's body, for the CLI."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..exceptions import ConfigError
from .runtime import check_java, check_pyspark
from .spark import ProgressFn, export_table, resolve_table

if TYPE_CHECKING:
    from ..app import App

__all__ = ["cli_export"]


def cli_export(
    app: App,
    table: str,
    out: str,
    *,
    fmt: str = "parquet",
    master: str | None = None,
    all_versions: bool = False,
    broker: str | None = None,
    conf: Mapping[str, str] | None = None,
    follow: bool = False,
    interval: float = 1.0,
    app_spec: str | None = None,
) -> int:
    """``agentstream -A MODULE export TABLE --out PATH [--follow]``: exit status 0 on success.

    Errors of agentstream's own (no Java, no such table, broker unreachable) propagate to the
    CLI, which prints them without a traceback; they are found before the JVM starts.
    """
    resolve_table(app, table)
    check_pyspark()
    check_java()
    say: ProgressFn = lambda line: print(line, flush=True)  # noqa: E731
    if follow:
        if fmt != "parquet" or all_versions:
            raise ConfigError(
                "follow",
                "--follow keeps the latest value per key as Parquet",
                "drop --format/--all-versions (or export once without --follow)",
            )
        from .follow import follow_table  # imports pyspark: only when following

        follow_table(
            app_spec or app,
            table,
            out,
            master=master or "local[*]",
            broker=broker,
            interval=interval,
            conf=dict(conf or {}),
            progress=say,
        )
        return 0
    try:
        export_table(
            app_spec or app,
            table,
            out,
            fmt=fmt,
            master=master or "local[*]",
            latest=not all_versions,
            broker=broker,
            progress=say,
            conf=conf,
        )
    finally:
        from pyspark.sql import SparkSession

        session = SparkSession.getActiveSession()
        if session is not None:
            session.stop()
    return 0
