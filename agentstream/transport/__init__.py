"""Pick a transport by broker URL scheme: ``kafka://`` (aiokafka) or ``memory://`` (in-process twin)."""

from __future__ import annotations

from typing import Any

from ..exceptions import ConfigError
from .base import Transport

__all__ = ["get_transport", "Transport", "SCHEMES"]

SCHEMES = ("kafka", "memory")


def get_transport(url: str, settings: Any = None) -> Transport:
    """The transport for ``url``; imports lazily so ``memory://`` never needs a broker client.
    ``settings`` (the app's) carry the broker's TLS/SASL configuration."""
    transport = _for_scheme(url, settings)
    extra = getattr(settings, "extra", None) or {}
    if extra.get("topic_allow_declare") is False:  # Faust's: topics are managed by operations
        from .existing import existing_topics_only

        return existing_topics_only(transport)
    return transport


def _for_scheme(url: str, settings: Any) -> Transport:
    scheme = url.partition("://")[0].lower() if isinstance(url, str) and "://" in url else ""
    if scheme == "kafka":
        from .kafka.security import client_security
        from .kafka.transport import KafkaTransport

        if settings is None:
            return KafkaTransport(url)
        return KafkaTransport(
            url,
            security=client_security(settings),
            replication_factor=getattr(settings, "topic_replication_factor", -1),
        )
    if scheme == "memory":
        from .memory import MemoryTransport

        transport: Transport = MemoryTransport(url)
        return transport
    raise ConfigError(
        "broker",
        f"{url!r} has no supported scheme (supported: {', '.join(s + '://' for s in SCHEMES)})",
        "use kafka://host:port for a Kafka broker (e.g. kafka://127.0.0.1:9092, or run "
        "`agentstream dev-broker`) or memory:// for the in-process transport used in tests",
    )
