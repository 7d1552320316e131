"""Which of the worker's settings each aiokafka client understands, and how aiokafka errors read.

Shared by the producer, the consumer and the admin client, so an error names its cause the same
way whichever client raised it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...exceptions import TransportError

__all__ = ["PRODUCER_KEYS", "CONSUMER_KEYS", "pick", "describe", "started"]

PRODUCER_KEYS = frozenset(
    {
        "client_id",
        "acks",
        "linger_ms",
        "max_batch_size",
        "max_request_size",
        "compression_type",
        "request_timeout_ms",
        "retry_backoff_ms",
        "metadata_max_age_ms",
        "connections_max_idle_ms",
        "send_backoff_ms",
        "transactional_id",
        "transaction_timeout_ms",
    }
)
CONSUMER_KEYS = frozenset(
    {
        "client_id",
        "auto_offset_reset",
        "session_timeout_ms",
        "heartbeat_interval_ms",
        "rebalance_timeout_ms",
        "max_poll_interval_ms",
        "fetch_max_wait_ms",
        "fetch_min_bytes",
        "fetch_max_bytes",
        "max_partition_fetch_bytes",
        "max_poll_records",
        "isolation_level",
        "request_timeout_ms",
        "retry_backoff_ms",
        "metadata_max_age_ms",
        "connections_max_idle_ms",
        "consumer_timeout_ms",
        "group_instance_id",
        "check_crcs",
    }
)


def pick(settings: Mapping[str, Any], keys: frozenset[str]) -> dict[str, Any]:
    """Only the settings aiokafka understands for this client; None means 'aiokafka default'."""
    return {k: v for k, v in settings.items() if k in keys and v is not None}


def describe(exc: BaseException) -> str:
    """``Kind: text`` of an exception, for one-line error messages."""
    text, kind = str(exc), type(exc).__name__
    return text if text.startswith(kind) else f"{kind}: {text}" if text else kind


def started(client: Any, what: str) -> Any:
    """``client`` (aiokafka's) if the wrapper started it; else the error that says to start it."""
    if client is None:
        raise TransportError(f"{what} is not started; call await {what}.start() first")
    return client
