"""What agentstream does with each Faust *argument* of a declaration (``app.timer(traced=...)``,
``app.Table(window=...)``...) that has no agentstream counterpart of the same meaning.

The rule is the settings' (:mod:`agentstream.faust_settings`): an argument is **honoured** (the
declaration acts on it), **refused** (given a value other than Faust's default, the call raises
``TypeError`` naming the argument, why, and what to do instead) or **not applicable** (it cannot
matter to agentstream: logged once at INFO, and listed here with the reason). Arguments that mean
the same in both (``app.agent(concurrency=)``, ``app.topic(partitions=)``...) are not listed.
The table is the configuration reference's second section (``make faust-settings-doc``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Final

from .faust_args import log_once
from .faust_settings import Status

__all__ = ["FaustArgument", "ARGUMENTS", "check", "render_markdown"]

_UNSET: Final = object()  # no default worth naming: any value given counts


class _Std:
    """Faust's default ``sys.stdout``/``sys.stderr``: whichever stream is current when compared."""

    def __init__(self, name: str) -> None:
        self.name = name

    def matches(self, value: Any) -> bool:
        return value is getattr(sys, self.name) or value is getattr(sys, f"__{self.name}__")

    def __repr__(self) -> str:
        return f"sys.{self.name}"


@dataclass(frozen=True)
class FaustArgument:
    call: str  # e.g. "app.timer"
    name: str
    default: Any  # Faust's default: a value equal to it is never refused nor logged
    status: Status
    how: str  # honoured: what acts on it; refused / not applicable: why (and what to do instead)


H, R, NA = Status.HONOURED, Status.REFUSED, Status.NOT_APPLICABLE
_NO_TRACER = (
    "Faust traces it only through an OpenTracing `app.tracer`; agentstream has none (its OpenTelemetry tracing, "
    "docs/observability.md, follows records, not timers), and it runs the same"
)
_LOOP = "the worker runs its own event loop (uvloop); objects bind to it when the worker starts"
_BEACON = "mode's service-graph beacon: agentstream's worker starts and stops services itself"
_STREAM_KWARGS = (
    "Faust's internal Stream options (e.g. `concurrency_index`, `prev`, `enable_acks`) have no counterpart: "
    "use the stream's methods (`take`, `group_by`, `filter`...)"
)

ARGUMENTS: Final[tuple[FaustArgument, ...]] = (
    FaustArgument("app.timer", "traced", True, NA, _NO_TRACER),
    FaustArgument(
        "app.timer",
        "max_drift_correction",
        0.1,
        H,
        "a wake-up late by d seconds shortens the next sleep by d, at most this much (Faust's timer drift correction)",
    ),
    FaustArgument("app.crontab", "traced", True, NA, _NO_TRACER),
    FaustArgument("app.task", "traced", True, NA, _NO_TRACER),
    FaustArgument(
        "app.page",
        "base",
        None,
        H,
        "a function view becomes a subclass of this `agentstream.web.View` subclass (anything else: TypeError)",
    ),
    FaustArgument("app.page", "name", None, H, "the route's name: `web.url_for(name, **params)` builds its URL"),
    FaustArgument(
        "app.command",
        "base",
        None,
        H,
        "an `agentstream.faust.cli.AppCommand` subclass: the command subclasses it (anything else: TypeError)",
    ),
    FaustArgument(
        "app.command",
        "**kwargs",
        _UNSET,
        R,
        "Faust sets them as attributes of the AppCommand class made with `base=`; pass `base=` an AppCommand "
        "subclass that defines them",
    ),
    FaustArgument("app.channel", "loop", None, NA, _LOOP),
    FaustArgument("app.stream", "beacon", None, NA, _BEACON),
    FaustArgument("app.stream", "**kwargs", _UNSET, R, _STREAM_KWARGS),
    FaustArgument(
        "app.agent",
        "supervisor_strategy",
        None,
        R,
        "an agent's exception goes where the app's `on_agent_error` says (skip, dead-letter or stop), not to a "
        "supervisor; set on_agent_error",
    ),
    FaustArgument("app.agent", "help", None, H, "shown by `agentstream agents` (default: the function's docstring)"),
    FaustArgument(
        "app.agent",
        "use_reply_headers",
        True,
        R,
        "replies always go by Faust's reply headers (`Faust-Ag-ReplyTo`, `Faust-Ag-CorrelationId`); "
        "False (the request wrapped in the value) is not offered",
    ),
    FaustArgument(
        "app.agent",
        "**kwargs",
        _UNSET,
        R,
        "Faust passes them to its Agent class; agentstream's agent has no such option",
    ),
    FaustArgument(
        "app.topic",
        "acks",
        True,
        R,
        "agentstream commits a record's offset only once it is handled; acks=False (Faust acks on receipt: "
        "at most once) is not offered",
    ),
    FaustArgument(
        "app.topic",
        "maxsize",
        None,
        R,
        "records are buffered per partition up to the `buffer_max_records` setting (Faust's "
        "`stream_buffer_maxsize`); set that instead",
    ),
    FaustArgument(
        "app.topic",
        "allow_empty",
        False,
        H,
        "True: a record without a value (a tombstone) reaches the agent as None even on a Record-typed topic; "
        "False (Faust's default): there it is a value decode error, handled by on_decode_error",
    ),
    FaustArgument(
        "app.topic",
        "has_prefix",
        False,
        H,
        "the name already carries the app id: `group_by` over it names its repartition topic without adding it",
    ),
    FaustArgument("app.topic", "loop", None, NA, _LOOP),
    FaustArgument(
        "app.Table",
        "window",
        None,
        R,
        "make a windowed table with `.tumbling(...)`, `.hopping(...)` or `.sliding(...)` on the table",
    ),
    FaustArgument(
        "app.Table",
        "recovery_buffer_size",
        1000,
        R,
        "a restore writes each fetched changelog batch (up to 10,000 records) in one RocksDB write batch; "
        "there is no per-table buffer to size",
    ),
    FaustArgument(
        "app.Table",
        "standby_buffer_size",
        None,
        R,
        "standbys write each fetched changelog batch at once; there is no per-table buffer to size",
    ),
    FaustArgument(
        "app.Table",
        "on_changelog_event",
        None,
        R,
        "changelog records are applied a fetched batch at a time, with no per-record callback; use "
        "`@table.on_recover` (after each recovery)",
    ),
    FaustArgument("app.Table", "on_recover", None, H, "registered as `@table.on_recover`: called after each recovery"),
    FaustArgument(
        "app.Table",
        "is_global",
        False,
        H,
        "True makes the table an `app.GlobalTable` (every worker holds every partition)",
    ),
    FaustArgument(
        "app.Table",
        "synchronize_all_active_partitions",
        False,
        R,
        "global tables are read from their changelog by every worker; there is no active-partition "
        "synchronisation to turn on",
    ),
    FaustArgument(
        "app.Table",
        "options",
        None,
        R,
        "per-table RocksDB options are not offered: every table's store shares the worker's RocksDB memory budget "
        "(rocksdb_memory_mb, docs/deployment.md)",
    ),
    FaustArgument("app.Table", "beacon", None, NA, _BEACON),
    FaustArgument("app.Table", "loop", None, NA, _LOOP),
    FaustArgument("Service", "loop", None, NA, _LOOP),
    FaustArgument("Service", "beacon", None, NA, _BEACON),
    FaustArgument("Worker", "sensors", None, H, "each is added to `app.sensors` before the worker starts"),
    FaustArgument("Worker", "debug", False, H, "True sets the app's `debug` setting: asyncio's debug mode"),
    FaustArgument("Worker", "logging_config", None, H, "the app's `logging_config` setting (dictConfig at start)"),
    FaustArgument("Worker", "loghandlers", None, H, "the app's `loghandlers` setting (added to the root logger)"),
    FaustArgument("Worker", "quiet", False, NA, "agentstream's worker prints no banner; what it logs follows loglevel"),
    FaustArgument("Worker", "loop", None, NA, _LOOP),
    FaustArgument(
        "Worker",
        "blocking_timeout",
        None,
        H,
        "the app's `blocking_timeout` setting: a WARNING when the event loop was blocked that long",
    ),
    FaustArgument(
        "Worker",
        "console_port",
        50101,
        R,
        "Faust's aiomonitor console is not built in; the web server's /status shows the worker",
    ),
    FaustArgument(
        "Worker", "redirect_stdouts", None, H, "the app's `worker_redirect_stdouts` setting (True: print() to the log)"
    ),
    FaustArgument("Worker", "redirect_stdouts_level", None, H, "the app's `worker_redirect_stdouts_level` setting"),
    FaustArgument("Worker", "workdir", None, R, "the worker does not change directory; start it where it should run"),
    FaustArgument("Worker", "stdout", _Std("stdout"), R, "the worker logs to stderr or `logfile`; redirect there"),
    FaustArgument("Worker", "stderr", _Std("stderr"), R, "the worker logs to stderr or `logfile`; redirect there"),
    FaustArgument(
        "Worker",
        "**kwargs",
        _UNSET,
        R,
        "mode's other Worker options (e.g. `daemon`, `override_logging`) have no counterpart; set app settings",
    ),
    FaustArgument(
        "SSLCredentials",
        "purpose",
        None,
        H,
        "`ssl.Purpose.SERVER_AUTH` (the default): the client context verifies the broker; `CLIENT_AUTH` (a "
        "server's context, which cannot connect to a broker) raises TypeError",
    ),
)

_BY_KEY: Final = {(a.call, a.name): a for a in ARGUMENTS}


def _same(value: Any, default: Any) -> bool:
    if default is _UNSET:
        return False
    if value is default:
        return True
    if isinstance(default, _Std):
        return default.matches(value)
    try:
        return bool(value == default) and type(value) is type(default)
    except Exception:  # an object whose == raises is not the default
        return False


def check(call: str, **given: Any) -> None:
    """Act on the refused and not-applicable Faust arguments of ``call`` (None and Faust's default
    never count): raise ``TypeError`` for a refused one, log a not-applicable one once. Names not in
    the table fall under ``call``'s ``**kwargs`` row (refused). The call site handles the honoured ones."""
    for name, value in given.items():
        if value is None:
            continue
        entry = _BY_KEY.get((call, name)) or _BY_KEY.get((call, "**kwargs"))
        if entry is None:
            raise TypeError(f"{call}() got an unexpected keyword argument {name!r}")
        if entry.status is Status.HONOURED or _same(value, entry.default):
            continue
        if entry.status is Status.REFUSED:
            shown = name if entry.name != "**kwargs" else f"{name} (one of Faust's **kwargs)"
            raise TypeError(f"{call}({shown}={value!r}) is not supported by agentstream: {entry.how}")
        log_once(f"{call}:{name}", "%s(%s=...) does not apply to agentstream: %s", call, name, entry.how)


def render_markdown() -> str:
    """The reference's section on Faust's declaration arguments (appended to docs/faust-settings.md)."""
    counts = {s: sum(1 for a in ARGUMENTS if a.status is s) for s in Status}
    lines = [
        "",
        "## Faust's declaration arguments",
        "",
        f"The arguments of Faust's declarations that agentstream has no same-named counterpart for "
        f"({len(ARGUMENTS)}): **honoured** ({counts[Status.HONOURED]}), **refused** "
        f"({counts[Status.REFUSED]}: given a value other than Faust's default, the call raises `TypeError` "
        f"naming it and why) or **not applicable** ({counts[Status.NOT_APPLICABLE]}: logged once, and why).",
        "",
        "| declaration | argument | Faust's default | status | agentstream |",
        "|---|---|---|---|---|",
    ]
    for a in ARGUMENTS:
        default = "-" if a.default is _UNSET else f"`{a.default!r}`"
        lines.append(f"| `{a.call}` | `{a.name}` | {default} | {a.status.value} | {a.how} |")
    return "\n".join(lines) + "\n"
