"""Faust's arguments as the core accepts them: setting names, ``app.topic`` options, and one INFO
line for each Faust setting that does not apply (the status of every Faust setting is in
:mod:`agentstream.faust_settings`, of every declaration argument in :mod:`agentstream.faust_arguments`).

``App(...)``, ``app.topic(...)``, ``app.Table(...)``, ``app.timer(...)`` and the other
declarations take Faust's keyword arguments themselves, so a Faust app runs with ``import
agentstream as faust``. What they need of Faust is this module: name tables and pure
translations, no runtime features. It sits in the foundation because the App (below the CLI,
the web server and the :mod:`agentstream.faust` compat package) must translate while it is being
constructed; Faust's module names, aliases, its ``Worker`` and its serializers API live in
:mod:`agentstream.faust`, which nothing in the core imports.

A migrated app says what changed instead of silently behaving differently: a setting or argument
that does not apply is logged ONCE per process (logger ``agentstream.faust``), with the reason.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from .durations import to_seconds
from .exceptions import ConfigError
from .faust_settings import _UNSET, FAUST_SETTINGS, Status

log = logging.getLogger("agentstream.faust")

__all__ = [
    "translate_settings",
    "resolve_aliases",
    "log_unknown_settings",
    "topic_options",
    "log_once",
    "flush_deferred_logs",
    "drop_deferred_logs",
]

# Faust setting -> agentstream setting (every Faust setting's status: agentstream/faust_settings.py) (durations in seconds, like both)
RENAMED = {
    "broker_session_timeout": "session_timeout",
    "broker_heartbeat_interval": "heartbeat_interval",
    "broker_rebalance_timeout": "rebalance_timeout",
    "broker_commit_interval": "commit_interval",
    "broker_commit_every": None,  # refused unless Faust's default (faust_settings)
    "broker_max_poll_records": "max_poll_records",
    "stream_buffer_maxsize": "buffer_max_records",
    "datadir": "data_dir",
    "producer_linger": "producer_linger",
    "Stream": "stream_class",
    "Agent": "agent_class",
    "Topic": "topic_class",
    "url": "broker",  # Faust's old name of broker
}
# Faust App's older names (faust.App._prepare_compat_settings): honoured as the setting they stand for
ALIASES = {
    "client_id": "broker_client_id",
    "create_reply_topic": "reply_create_topic",
    "num_standby_replicas": "table_standby_replicas",
    "default_partitions": "topic_partitions",
    "replication_factor": "topic_replication_factor",
}
# Options agentstream reads from App(**options) / settings.extra itself: never "unknown".
CONSUMED = {
    "key_serializer",
    "value_serializer",
    "autodiscover",
    "origin",
    "web_redirect",
    "web_forward_timeout",
    "web_advertised_host",
    "web_history",
    "env_prefix",  # the prefix of Faust's environment variables (settings.faust_environment)
}
NOTES = {
    "loop": "the worker runs its own event loop (uvloop)",
}
_logged: set[str] = set()
_deferred: list[tuple[str, tuple[Any, ...]]] = []


def _passthrough_seconds(value: Any) -> Any:
    return to_seconds(value) if isinstance(value, timedelta) else value


def _none_is_default(name: str) -> bool:
    """Faust treats an explicit None as "not given" for a setting whose default is None (or
    computed): ``web_host=os.environ.get("WEB_HOST")`` means the default when the variable is unset."""
    entry = FAUST_SETTINGS.get(name)
    return entry is not None and (entry.default is None or entry.default is _UNSET)


def resolve_aliases(options: dict[str, Any]) -> dict[str, Any]:
    """Faust's older setting names -> the settings they stand for (both given: ConfigError, as Faust)."""
    out = dict(options)
    for old, new in ALIASES.items():
        if old not in out:
            continue
        value = out.pop(old)
        if out.get(new) is not None:
            raise ConfigError(
                old, f"both {old!r} (Faust's older name) and {new!r} are given", f"keep only {new}={value!r}"
            )
        out[new] = value
    return out


def translate_settings(options: dict[str, Any]) -> dict[str, Any]:
    """Faust names and values -> agentstream's (timedeltas become seconds; Faust's older names
    resolved; None for a setting whose Faust default is None left out, so the default applies)."""
    out: dict[str, Any] = {}
    for key, value in resolve_aliases(options).items():
        if value is None and _none_is_default(key):
            continue
        value = _passthrough_seconds(value)
        if key == "producer_linger_ms" and isinstance(value, (int, float)):
            key, value = "producer_linger", value / 1000.0
        elif key in RENAMED and RENAMED[key] is not None:
            key = str(RENAMED[key])
        elif key == "broker" and isinstance(value, (list, tuple)):
            value = ";".join(str(v) for v in value)
        out.setdefault(key, value)
    return out


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
    """Called by the CLI's worker command once logging is set up."""
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
        known = FAUST_SETTINGS.get(name)
        if known is not None:
            if known.status is Status.NOT_APPLICABLE:
                log_once(
                    f"setting:{name}", "app %s: Faust setting %s=%r does not apply: %s", app_id, name, value, known.how
                )
            continue  # honoured elsewhere, or refused (faust_settings.refuse_unsupported) when it asked for more
        note = NOTES.get(name) or "agentstream has no such setting; it is ignored (see docs/migrating-from-faust.md)"
        log_once(f"setting:{name}", "app %s: Faust setting %s=%r is not used: %s", app_id, name, value, note)


def topic_options(name: str, more: Sequence[str], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Faust-only ``app.topic`` arguments -> agentstream's (``compacting``, ``retention``, ``schema``),
    popped from ``kwargs``; the rest stay there for :func:`agentstream.faust_arguments.check`."""
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
        config["retention.ms"] = str(int(to_seconds(retention) * 1000))
    if config:
        out["config"] = config
    return out
