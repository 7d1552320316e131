"""What lets a Faust app run with ``import agentstream as faust``: settings translation, the
Faust-only arguments of ``app.topic``/``app.Table``, and the runners behind ``@app.crontab``,
``@app.service``, ``@app.task(on_leader=True)`` and ``faust.Worker`` (``@app.table_route`` is a core
feature: :mod:`agentstream.routes`).

Kept apart from :mod:`agentstream.app` so the App stays a registry; every Faust option that
agentstream does not act on is logged ONCE at INFO with what agentstream does instead, so a
migrated app says what changed instead of silently behaving differently.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Sequence

from . import crontab as _cron

if TYPE_CHECKING:
    from .types import AppT as App  # the App's interface: app.py imports this module
    from .service import Service

log = logging.getLogger("agentstream.faust")

__all__ = ["translate_settings", "log_unknown_settings", "topic_options", "drop_deferred_logs", "table_options",
           "service_runner", "crontab_runner", "leader_task"]  # faust.Worker: agentstream.faust_worker

# Faust setting -> agentstream setting (durations in seconds, like both)
RENAMED = {
    "broker_session_timeout": "session_timeout",
    "broker_heartbeat_interval": "heartbeat_interval",
    "broker_rebalance_timeout": "rebalance_timeout",
    "broker_commit_interval": "commit_interval",
    "broker_commit_every": None,  # see NOTES
    "broker_max_poll_records": "max_poll_records",
    "stream_buffer_maxsize": "buffer_max_records",
    "datadir": "data_dir",
    "web_bind": "web_host",
    "producer_linger": "producer_linger",
}
# Options agentstream reads from App(**options) / settings.extra itself: never "unknown".
CONSUMED = {"key_serializer", "value_serializer", "autodiscover", "origin", "web_redirect", "web_forward_timeout", "web_advertised_host",
            "web_history"}
NOTES = {
    "broker_commit_every": "commits happen every commit_interval seconds (and on rebalance/stop)",
    "topic_replication_factor": "topics are created with the broker's default replication factor",
    "topic_allow_declare": "agentstream creates missing topics when the worker starts",
    "stream_wait_empty": "a stopping worker finishes the current record of each task, then commits",
    "consumer_auto_offset_reset": "a group without committed offsets starts at the earliest offset",
    "tabledir": "table stores live under <data_dir>/<app id>/tables",
    "table_cleanup_interval": "windows expire as stream time passes, not on a cleanup timer",
    "timezone": "timers and crontabs use their own timezone= argument (default UTC)",
    "debug": "use -l debug",
    "canonical_url": "workers advertise their bound web address (settings.extra web_advertised_host overrides the host)",
    "loop": "the worker runs its own event loop (uvloop)",
}
_logged: set[str] = set()


def _seconds(value: Any) -> Any:
    return value.total_seconds() if isinstance(value, timedelta) else value


def translate_settings(options: dict[str, Any]) -> dict[str, Any]:
    """Faust names and values -> agentstream's (timedeltas become seconds)."""
    out: dict[str, Any] = {}
    for key, value in options.items():
        value = _seconds(value)
        if key == "producer_linger_ms" and isinstance(value, (int, float)):
            key, value = "producer_linger", value / 1000.0
        elif key in RENAMED and RENAMED[key] is not None:
            key = str(RENAMED[key])
        elif key == "broker" and isinstance(value, (list, tuple)):
            value = ";".join(str(v) for v in value)
        out.setdefault(key, value)
    return out


_deferred: list[tuple[str, tuple[Any, ...]]] = []


def log_once(name: str, message: str, *args: Any) -> None:
    """Log at INFO once per process; before logging is configured (the CLI imports the app first)
    the line is kept and written by :func:`flush_deferred_logs`."""
    if name in _logged:
        return
    _logged.add(name)
    if logging.getLogger().handlers or log.handlers:
        log.info(message, *args)
    else:
        _deferred.append((message, args))


def flush_deferred_logs() -> None:
    """Called by the CLI once logging is set up."""
    while _deferred:
        message, args = _deferred.pop(0)
        log.info(message, *args)


def drop_deferred_logs() -> None:
    """Called by CLI commands other than ``worker``: the notices concern a running worker only."""
    _deferred.clear()


def log_unknown_settings(app_id: str, extra: dict[str, Any]) -> None:
    """One INFO line per unknown Faust option (per process): what agentstream does instead."""
    for name, value in extra.items():
        if name in CONSUMED:
            continue
        note = NOTES.get(name) or "agentstream has no such setting; it is ignored (see docs/migrating-from-faust.md)"
        log_once(f"setting:{name}", "app %s: Faust setting %s=%r is not used: %s", app_id, name, value, note)


# -- topics and tables ------------------------------------------------------------------------------
def topic_options(name: str, more: Sequence[str], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Faust-only ``app.topic`` arguments -> agentstream's (``compacting``, ``retention``, ``schema``)."""
    # several names and pattern= are handled by App.topic (TopicGroup) before this is called
    out: dict[str, Any] = {}
    schema = kwargs.pop("schema", None)
    if schema is not None:
        for attr in ("key_type", "value_type", "key_serializer", "value_serializer"):
            if getattr(schema, attr, None) is not None:
                out[attr] = getattr(schema, attr)
    if kwargs.pop("compacting", None):
        out["compacted"] = True
    config: dict[str, str] = {}
    retention = kwargs.pop("retention", None)
    if retention is not None:
        config["retention.ms"] = str(int(float(_seconds(retention)) * 1000))
    if config:
        out["config"] = config
    for key in list(kwargs):
        log_once(f"topic:{key}", "app.topic(%s=...) is accepted for Faust compatibility and ignored", key)
        kwargs.pop(key)
    return out


TABLE_IGNORED = ("window", "changelog_topic", "recovery_buffer_size", "standby_buffer_size", "extra_topic_configs",
                 "use_partitioner", "on_changelog_event", "synchronize_all_active_partitions", "options", "beacon",
                 "loop", "is_global", "on_recover")


def table_options(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Drop Faust-only Table arguments (each logged once); the rest go to agentstream's Table."""
    for key in TABLE_IGNORED:
        if key in kwargs:
            kwargs.pop(key)
            log_once(f"table:{key}", "app.Table(%s=...) is accepted for Faust compatibility and ignored", key)
    return kwargs


# -- background runners (worker startup tasks) -------------------------------------------------------------
def _is_leader(app: "App") -> bool:
    worker = app.worker
    return worker is not None and bool(worker.assignor.is_leader)


async def _call(fun: Callable[..., Any], app: "App") -> None:
    args = (app,) if len(inspect.signature(fun).parameters) == 1 else ()
    res = fun(*args)
    if inspect.isawaitable(res):
        await res


def leader_task(app: "App", fun: Callable[..., Any]) -> Callable[[], Awaitable[None]]:
    """``@app.task(on_leader=True)``: runs once the first assignment made this worker the leader."""

    async def run() -> None:
        worker = app.worker
        if worker is not None:
            await worker.assigned.wait()
        if _is_leader(app):
            await _call(fun, app)

    run.__name__ = getattr(fun, "__name__", "task")
    return run


def crontab_runner(app: "App", fun: Callable[..., Any], cron_format: str, timezone: Any,
                   on_leader: bool) -> Callable[[], Awaitable[None]]:
    """Sleep until the next fire time, call ``fun``, repeat (a failing call is logged, not fatal)."""
    schedule = _cron.CronSchedule(cron_format)  # parse at declaration: a bad expression fails at import
    name = getattr(fun, "__qualname__", repr(fun))

    async def run() -> None:
        while True:
            await asyncio.sleep(_cron.seconds_until(schedule, timezone) + 0.001)
            if on_leader and not _is_leader(app):
                continue
            try:
                await _call(fun, app)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.exception("crontab %s (%s) raised: %s", name, cron_format, exc)

    run.__name__ = f"crontab {name}"
    return run


def service_runner(service: Any) -> Callable[[], Awaitable[None]]:
    """Start the service with the worker; stop it when the worker stops."""

    async def run() -> None:
        instance = service() if isinstance(service, type) else service
        await instance.start()
        try:
            await asyncio.Event().wait()
        finally:
            await instance.stop()

    run.__name__ = f"service {getattr(service, '__name__', type(service).__name__)}"
    return run


# -- event.message.tp ----------------------------------------------------------------------------------------------
def _add_message_tp() -> None:
    """Faust's messages carry ``.tp``; ours are aiokafka ConsumerRecords, given the same read-only view."""
    from aiokafka.structs import ConsumerRecord, TopicPartition

    if not hasattr(ConsumerRecord, "tp"):
        ConsumerRecord.tp = property(lambda m: TopicPartition(m.topic, m.partition))


_add_message_tp()


def uuid() -> str:
    """Faust's ``faust.uuid()``: a new random UUID as a string."""
    import uuid as _uuid

    return str(_uuid.uuid4())
