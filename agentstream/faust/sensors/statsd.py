"""``faust.sensors.statsd``: Faust's ``StatsdMonitor`` on the real ``statsd`` client, with
Faust's metric names (labels folded into the name: ``topic.<topic>.messages_received``,
``read_offset.<topic>.<partition>``...)."""

from __future__ import annotations

from functools import cached_property
from typing import Any

from agentstream.exceptions import ImproperlyConfigured

from ._client import ClientMonitor, Labels

try:
    import statsd  # type: ignore[import-untyped,unused-ignore]
except ImportError:  # pragma: no cover - the extra is not installed
    statsd = None  # type: ignore[assignment,unused-ignore]

__all__ = ["StatsdMonitor"]

# metric -> the statsd name, labels filled in (Faust's names); a metric not listed keeps its own
_NAMES = {
    "topic_messages_received": "topic.{topic}.messages_received",
    "read_offset": "read_offset.{topic}.{partition}",
    "stream_events": "stream.{stream}.events",
    "table_keys_retrieved": "table.{table}.keys_retrieved",
    "table_keys_updated": "table.{table}.keys_updated",
    "table_keys_deleted": "table.{table}.keys_deleted",
    "topic_messages_sent": "topic.{topic}.messages_sent",
    "messages_send_failed": "messages_sent_error",
    "committed_offset": "committed_offset.{topic}.{partition}",
    "end_offset": "end_offset.{topic}.{partition}",
    "http_status_code": "http_status_code.{status_code}",
}


class StatsdMonitor(ClientMonitor):
    """Faust's statsd monitor: ``StatsdMonitor(host, port, prefix, rate)``, then
    ``app.monitor = monitor`` (or ``app.sensors.add(monitor)``)."""

    def __init__(
        self, host: str = "localhost", port: int = 8125, prefix: str = "faust-app", rate: float = 1.0, **kwargs: Any
    ) -> None:
        if statsd is None:
            raise ImproperlyConfigured(
                "StatsdMonitor", "the statsd client is not installed", "pip install 'agentstream[metrics]'"
            )
        super().__init__(host, port, prefix, rate, **kwargs)

    @cached_property
    def client(self) -> Any:
        """The statsd client (made on first use)."""
        return statsd.StatsClient(host=self.host, port=self.port, prefix=self.prefix)

    def emit(self, kind: str, metric: str, value: float, labels: Labels) -> None:
        name = _NAMES.get(metric, metric).format(**labels)
        client = self.client
        if kind == "incr":
            client.incr(name, int(value), rate=self.rate)
        elif kind == "decr":
            client.decr(name, int(value), rate=self.rate)
        elif kind == "gauge":
            client.gauge(name, value)
        else:
            client.timing(name, value, rate=self.rate)
