"""The Kafka client settings: checked once at start-up, then turned into the clients' arguments.

Faust's names (``consumer_auto_offset_reset``, ``producer_acks``, ``broker_client_id``...) are
agentstream's settings; this module is the one place that says what each becomes for the
consumer and the producer (Kafka's config names, as aiokafka and the memory transport take
them), so a setting is passed on or refused here and nowhere else.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Any

from .exceptions import ConfigError

if TYPE_CHECKING:
    from .settings import Settings

__all__ = [
    "OFFSET_RESETS",
    "COMPRESSIONS",
    "ISOLATION_LEVELS",
    "check_client_settings",
    "consumer_settings",
    "producer_settings",
]

OFFSET_RESETS = ("earliest", "latest", "none")
COMPRESSIONS = ("gzip", "snappy", "lz4", "zstd")
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
_ACKS = {"all": -1, "-1": -1, "1": 1, "0": 0}
# aiokafka compresses snappy, lz4 and zstd batches with cramjam (gzip with the standard library)
_CODEC_LIBRARY = {"snappy": "cramjam", "lz4": "cramjam", "zstd": "cramjam"}


def _acks(value: Any) -> int:
    """Faust's ``producer_acks``: -1/'all', 1 or 0 (ints or their text, from the environment)."""
    key = str(value).strip().lower() if not isinstance(value, bool) else ""
    if key not in _ACKS:
        raise ConfigError(
            "producer_acks",
            f"{value!r} is not an acks value",
            "use -1 or 'all' (every in-sync replica, the default), 1 (the leader only) or 0 (no acknowledgement)",
        )
    return _ACKS[key]


def _check_choice(name: str, value: Any, choices: tuple[str, ...], fix: str) -> None:
    if value not in choices:
        raise ConfigError(name, f"{value!r} is not one of {', '.join(choices)}", fix)


def _check_positive(s: Settings, names: tuple[str, ...], unit: str) -> None:
    for name in names:
        value = getattr(s, name)
        if not value > 0:
            raise ConfigError(name, f"must be > 0 {unit}, got {value!r}", f"set {name} to a positive number of {unit}")


def check_client_settings(s: Settings) -> None:
    """Raise ConfigError for the first client setting agentstream cannot honour (normalises acks,
    empty ids and 'none' compression)."""
    _check_choice(
        "consumer_auto_offset_reset",
        s.consumer_auto_offset_reset,
        OFFSET_RESETS,
        "use earliest (read a new group's partitions from the start), latest (only records produced from now "
        "on) or none (stop when a partition has no committed offset)",
    )
    s.producer_acks = _acks(s.producer_acks)
    if s.processing_guarantee == "exactly_once" and s.producer_acks != -1:
        raise ConfigError(
            "producer_acks",
            f"acks={s.producer_acks} with processing_guarantee='exactly_once': transactions need acks=all",
            "remove producer_acks (or set it to 'all'), or use processing_guarantee='at_least_once'",
        )
    compression = s.producer_compression_type
    if compression is not None and str(compression).lower() in ("", "none"):
        s.producer_compression_type = compression = None
    if compression is not None:
        if not isinstance(compression, str) or compression.lower() not in COMPRESSIONS:
            raise ConfigError(
                "producer_compression_type",
                f"{compression!r} is not a compression type",
                f"use one of {', '.join(COMPRESSIONS)}, or leave it unset for no compression",
            )
        s.producer_compression_type = compression = compression.lower()
        library = _CODEC_LIBRARY.get(compression)
        if library is not None and importlib.util.find_spec(library) is None:
            raise ConfigError(
                "producer_compression_type",
                f"{compression} needs the {library} library, which is not installed",
                f"pip install {library} (agentstream's install requirements include it)",
            )
    level = s.consumer_isolation_level or None
    s.consumer_isolation_level = level
    if level is not None:
        _check_choice(
            "consumer_isolation_level",
            level,
            ISOLATION_LEVELS,
            "use read_committed (skip records of open and aborted transactions) or read_uncommitted",
        )
        if s.processing_guarantee == "exactly_once" and level != "read_committed":
            raise ConfigError(
                "consumer_isolation_level",
                f"{level} with processing_guarantee='exactly_once' would read aborted records",
                "remove consumer_isolation_level (exactly_once reads read_committed)",
            )
    if s.consumer_group_instance_id is not None and not str(s.consumer_group_instance_id).strip():
        s.consumer_group_instance_id = None
    if not s.broker_client_id:
        raise ConfigError("broker_client_id", "must not be empty", "leave it unset, or name the app's clients")
    _check_positive(s, ("broker_max_poll_interval", "broker_request_timeout", "producer_request_timeout"), "seconds")
    _check_positive(
        s,
        (
            "consumer_max_fetch_size",
            "consumer_metadata_max_age_ms",
            "consumer_connections_max_idle_ms",
            "producer_max_request_size",
            "producer_metadata_max_age_ms",
            "producer_connections_max_idle_ms",
        ),
        "(bytes or milliseconds)",
    )
    if s.session_timeout > s.broker_request_timeout:
        raise ConfigError(
            "broker_request_timeout",
            f"{s.broker_request_timeout}s is below session_timeout={s.session_timeout}s (as Faust, refused)",
            "raise broker_request_timeout to at least session_timeout",
        )
    if s.producer_max_request_size < s.producer_max_batch_size:
        raise ConfigError(
            "producer_max_request_size",
            f"{s.producer_max_request_size} bytes is below producer_max_batch_size={s.producer_max_batch_size}",
            "make producer_max_request_size at least producer_max_batch_size",
        )


def _isolation_level(s: Settings) -> str:
    if s.consumer_isolation_level:
        return s.consumer_isolation_level
    # exactly_once: never read records of open or aborted transactions
    return "read_committed" if s.processing_guarantee == "exactly_once" else "read_uncommitted"


def consumer_settings(s: Settings, *, group: bool = False) -> dict[str, Any]:
    """The consumers' arguments. ``group=True``: the app's group member, which honours
    ``consumer_auto_offset_reset`` and ``consumer_group_instance_id``; the other consumers (table
    restore, replies, channels) have no committed offsets, position themselves and read from the
    earliest offset (an out-of-range restore position restarts at the log's start)."""
    return {
        "client_id": s.broker_client_id,
        "session_timeout_ms": int(s.session_timeout * 1000),
        "heartbeat_interval_ms": int(s.heartbeat_interval * 1000),
        "rebalance_timeout_ms": int(s.rebalance_timeout * 1000),
        "max_poll_interval_ms": int(s.broker_max_poll_interval * 1000),
        "max_poll_records": s.max_poll_records,
        "fetch_max_wait_ms": int(s.consumer_fetch_max_wait * 1000),
        "max_partition_fetch_bytes": s.consumer_max_fetch_size,
        "request_timeout_ms": int(s.broker_request_timeout * 1000),
        "metadata_max_age_ms": s.consumer_metadata_max_age_ms,
        "connections_max_idle_ms": s.consumer_connections_max_idle_ms,
        "check_crcs": s.broker_check_crcs,
        "auto_offset_reset": s.consumer_auto_offset_reset if group else "earliest",
        "group_instance_id": s.consumer_group_instance_id if group else None,
        "isolation_level": _isolation_level(s),
    }


def producer_settings(s: Settings) -> dict[str, Any]:
    """The producers' arguments (transactional producers add their ``transactional_id``)."""
    return {
        "client_id": s.broker_client_id,
        "acks": "all" if s.producer_acks == -1 else s.producer_acks,
        "linger_ms": int(s.producer_linger * 1000),
        "max_batch_size": s.producer_max_batch_size,
        "max_request_size": s.producer_max_request_size,
        "compression_type": s.producer_compression_type,
        "request_timeout_ms": int(s.producer_request_timeout * 1000),
        "metadata_max_age_ms": s.producer_metadata_max_age_ms,
        "connections_max_idle_ms": s.producer_connections_max_idle_ms,
    }
