"""What lets a Faust app run with ``import agentstream as faust``: settings translation, the
Faust-only arguments of ``app.topic``/``app.Table``, and the runners behind ``@app.crontab``,
``@app.service``, ``@app.task(on_leader=True)``, ``@app.table_route`` and ``faust.Worker``.

Kept apart from :mod:`agentstream.app` so the App stays a registry; every Faust option that
agentstream does not act on is logged ONCE at INFO with what agentstream does instead, so a
migrated app says what changed instead of silently behaving differently.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Sequence

from . import crontab as _cron
from .exceptions import TopologyError

if TYPE_CHECKING:
    from .app import App
    from .service import Service

log = logging.getLogger("agentstream.faust")

__all__ = ["translate_settings", "log_unknown_settings", "topic_options", "drop_deferred_logs", "table_options", "table_route",
           "Worker", "service_runner", "crontab_runner", "leader_task"]

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
    "version": "the app id is used as is (Faust appends -v<version> to topic and group names); "
               "to start over, change the app id or run `agentstream -A app reset`",
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


# -- table_route ---------------------------------------------------------------------------------------------------
ROUTED_HEADER = "X-Agentstream-Routed-By"


def table_route(table: Any, shard_param: str | None = None, *, query_param: str | None = None,
                match_info: str | None = None, exact_key: str | None = None) -> Callable[[Any], Any]:
    """Faust's ``@app.table_route``: run the view on the worker owning the key's table partition.

    The key comes from the URL (``match_info``), the query string (``query_param``/``shard_param``)
    or is ``exact_key``; a worker that does not own its partition forwards the request (same
    method, path, query and body) to the owner it learned in the last rebalance.
    """
    param = query_param or shard_param
    if exact_key is None and match_info is None and param is None:
        raise TopologyError("table_route needs match_info=, query_param= (or shard_param=) or exact_key=")

    def _decorate(fun: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fun)
        async def route(view: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
            from aiohttp import web

            from .web.responses import error_response
            from .web.tables import key_partition

            if exact_key is not None:
                key: Any = exact_key
            elif match_info is not None:
                key = request.match_info[match_info]
            else:
                assert param is not None
                if param not in request.query:
                    return error_response(400, f"missing query parameter {param!r}", f"pass ?{param}=<key>")
                key = request.query[param]
            server = view.web
            dumps = getattr(table, "_key_dumps", None) or table.key_codec.dumps  # a table or (topic_route) a topic
            p = key_partition(table, dumps(key))
            assignment = server.assignment()
            if getattr(table, "is_global", False) or p in assignment.active or request.headers.get(ROUTED_HEADER):
                return await fun(view, request, *args, **kwargs)
            owner = assignment.owners.get(p)
            if not owner or owner == server.address:
                return error_response(503, f"the owner of table {table.name!r} partition {p} is unknown "
                                      "(no assignment yet, or the group is rebalancing)", "retry in a second",
                                      headers={"Retry-After": "1"})
            return await _forward(request, owner, server.address, web)

        return route

    return _decorate


async def _forward(request: Any, owner: str, me: str, web: Any) -> Any:
    import aiohttp

    from .web.responses import error_response

    body = await request.read()
    headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
    headers[ROUTED_HEADER] = me
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
            async with session.request(request.method, f"http://{owner}{request.rel_url.raw_path_qs}",
                                       data=body or None, headers=headers, allow_redirects=False) as resp:
                data = await resp.read()
                return web.Response(body=data, status=resp.status,
                                    headers={"Content-Type": resp.headers.get("Content-Type", "application/json"),
                                             "X-Agentstream-Served-By": owner})
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
        return error_response(503, f"forwarding to the key's owner {owner} failed: {type(exc).__name__}: {exc}",
                              "retry later; the group rebalances when a worker dies", headers={"Retry-After": "1"})


# -- faust.Worker ------------------------------------------------------------------------------------------------------
class Worker:
    """``faust.Worker(app, loglevel='info').execute_from_commandline()``: run a worker from a script."""

    def __init__(self, app: "App", *services: Any, loglevel: str | int | None = None, logfile: str | None = None,
                 web_port: int | None = None, web_bind: str | None = None, web_host: str | None = None,
                 **kwargs: Any) -> None:
        self.app = app
        self.services = services
        self.loglevel = logging.getLevelName(loglevel) if isinstance(loglevel, int) else loglevel
        self.logfile = logfile
        changes: dict[str, Any] = {}
        if web_port is not None:
            changes["web_port"] = web_port
        if web_bind or web_host:
            changes["web_host"] = web_bind or web_host
        self.changes = changes

    def execute_from_commandline(self) -> None:
        """Run until SIGTERM/SIGINT; exits the process with the worker's exit code."""
        from .cli import _run, setup_logging
        from .worker.worker import Worker as _Worker

        if self.changes:
            self.app.settings = self.app.settings.replace(**self.changes)
        for svc in self.services:
            self.app.startup_tasks.append(service_runner(svc))
        setup_logging(str(self.loglevel or self.app.settings.loglevel), self.logfile)
        flush_deferred_logs()  # the Faust-setting notices, once, at worker start

        async def _go() -> int:
            return await _Worker(self.app, install_signal_handlers=True).run()

        raise SystemExit(int(_run(_go())))


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
