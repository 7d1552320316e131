"""One line of help per setting, shared by the worker's CLI flags and the configuration reference
in the docs (both are generated from :class:`agentstream.settings.Settings`).

A setting added without an entry here still gets a flag and a reference row: a field's
``metadata={"help": ...}`` wins, then this table, then a generic line naming type and default.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from .settings import Settings

__all__ = ["HELP", "setting_help", "setting_fields", "FLAG_ALIASES"]

HELP: dict[str, str] = {
    "broker": "broker URL: kafka://host:port[;host:port...] or memory:// (in-process, tests and quick runs)",
    "store": "table store URL: rocksdb:// (on disk, restored from the changelog) or memory://",
    "data_dir": "where table stores and checkpoints live (<data_dir>/<app id>/tables); put it on a persistent volume",
    "topic_partitions": "partitions of topics the app creates when the declaration gives none",
    "commit_interval": "seconds between commits (flush caches, changelogs, producer, offsets, checkpoints)",
    "tabledir": "where table stores live: <data_dir>/<id>/<tabledir>, or <tabledir>/<id> when absolute (Faust's)",
    "debug": "asyncio's debug mode on the worker's event loop (slow callbacks logged; Faust's debug)",
    "table_cleanup_interval": "seconds between wall-clock checks that close windows past their expires= (as Faust)",
    "max_task_idle": "seconds a task waits for an empty input that still has lag before it processes the others",
    "buffer_max_records": "records buffered per partition before the fetcher stops fetching it",
    "max_poll_records": "records one poll of the consumer returns at most",
    "session_timeout": (
        "seconds without a heartbeat before the group coordinator drops a worker; a worker that had no "
        "answer for about this long fences itself first (drops its unacknowledged writes, rejoins)"
    ),
    "heartbeat_interval": "seconds between heartbeats to the group coordinator (about a third of session_timeout)",
    "rebalance_timeout": "seconds the coordinator waits for every member to rejoin during a rebalance",
    "shutdown_timeout": "seconds a stopping worker waits for its agents and the final commit",
    "producer_linger": "seconds the producer waits to fill a batch (0 sends as soon as the sender is free)",
    "producer_max_batch_size": "bytes per producer batch and partition",
    "consumer_fetch_max_wait": "seconds a fetch waits on the broker for data before it answers empty (restores wait at most 0.02)",
    "on_decode_error": (
        "what a record that cannot be decoded does: skip, stop or dead-letter (after processing_exception_handler)"
    ),
    "on_agent_error": (
        "what an exception raised by an agent does: skip, stop or dead-letter (after agent_retries and "
        "processing_exception_handler)"
    ),
    "dead_letter_topic": "topic for records the dead-letter policy sets aside (default <app id>-dead-letters)",
    "processing_guarantee": "at_least_once or exactly_once (needs a broker with transactions)",
    "table_standby_replicas": "standby copies of every table partition kept warm on other workers",
    "table_cache_size": "table writes kept per table partition before they go to the store and changelog (0 writes through); also bounded to about 32 MiB of encoded entries",
    "web_enabled": "run the worker's web server (status page, metrics, table queries)",
    "web_port": "port of the worker's web server (0 picks a free one)",
    "loglevel": "log level: debug, info, warning or error",
}

# Flag spellings kept from earlier versions and from Faust, besides the generated --<name>.
FLAG_ALIASES: dict[str, tuple[str, ...]] = {
    # Faust's worker options: -b is the web bind address and -h the web host there (the broker is
    # --broker on the worker; -b stays the broker on send, export and reset, where Faust has no -b)
    "data_dir": ("--datadir",),
    "loglevel": ("-l",),
    "web_bind": ("-b",),
    "web_host": ("-h",),
    "web_port": ("-p",),
}


def setting_fields() -> list[tuple[dataclasses.Field[Any], Any]]:
    """Every user-facing setting with its resolved type (``id`` and ``extra`` excluded)."""
    hints = typing.get_type_hints(Settings)
    return [(f, hints.get(f.name, f.type)) for f in dataclasses.fields(Settings) if f.name not in ("id", "extra")]


def default_of(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


def setting_help(f: dataclasses.Field[Any], tp: Any) -> str:
    text = f.metadata.get("help") or HELP.get(f.name)
    if text:
        return str(text)
    name = getattr(tp, "__name__", str(tp))
    return f"the {f.name} setting ({name}, default {default_of(f)!r})"
