"""``faust.sensors.datadog``: Faust's ``DatadogMonitor`` on the real ``datadog`` client
(DogStatsd), with Faust's metric names and labels sent as tags (``topic:orders``...)."""

from __future__ import annotations

import re
from functools import cached_property
from typing import Any

from agentstream.exceptions import ImproperlyConfigured

from ._client import ClientMonitor, Labels

try:
    import datadog  # type: ignore[import-untyped,unused-ignore]
    from datadog.dogstatsd import DogStatsd  # type: ignore[attr-defined,import-untyped,unused-ignore]
except ImportError:  # pragma: no cover - the extra is not installed
    datadog = None  # type: ignore[assignment,unused-ignore]

__all__ = ["DatadogMonitor", "DatadogStatsClient"]

_UNSAFE = re.compile(r"[^0-9a-zA-Z_]")
_STATUS_IN_NAME = {"http_status_code"}  # Faust names the status in the metric (http_status_code.200)
_UNTAGGED = {"stream_events"}  # statsd's per-stream name; Datadog tags ``events`` with the stream instead


class DatadogStatsClient:
    """A statsd-shaped client over DogStatsd: labels become sanitized ``name:value`` tags."""

    def __init__(
        self, host: str = "localhost", port: int = 8125, prefix: str = "faust-app", rate: float = 1.0, **kwargs: Any
    ) -> None:
        self.client = DogStatsd(host=host, port=port, namespace=prefix, **kwargs)
        self.rate = rate

    @staticmethod
    def tags(labels: Labels | None) -> list[str] | None:
        if not labels:
            return None
        return [f"{_UNSAFE.sub('_', str(k))}:{_UNSAFE.sub('_', str(v))}" for k, v in labels.items()]

    def increment(self, metric: str, value: float = 1.0, labels: Labels | None = None) -> None:
        self.client.increment(metric, value=value, tags=self.tags(labels), sample_rate=self.rate)

    def decrement(self, metric: str, value: float = 1.0, labels: Labels | None = None) -> None:
        self.client.decrement(metric, value=value, tags=self.tags(labels), sample_rate=self.rate)

    def gauge(self, metric: str, value: float, labels: Labels | None = None) -> None:
        self.client.gauge(metric, value=value, tags=self.tags(labels), sample_rate=self.rate)

    def timing(self, metric: str, value: float, labels: Labels | None = None) -> None:
        self.client.timing(metric, value=value, tags=self.tags(labels), sample_rate=self.rate)

    def histogram(self, metric: str, value: float, labels: Labels | None = None) -> None:
        self.client.histogram(metric, value=value, tags=self.tags(labels), sample_rate=self.rate)

    def incr(self, metric: str, count: int = 1) -> None:
        self.increment(metric, value=count)

    def decr(self, metric: str, count: float = 1.0) -> None:
        self.decrement(metric, value=count)


class DatadogMonitor(ClientMonitor):
    """Faust's Datadog monitor: ``DatadogMonitor(host, port, prefix, rate)``, then
    ``app.monitor = monitor`` (or ``app.sensors.add(monitor)``)."""

    def __init__(
        self, host: str = "localhost", port: int = 8125, prefix: str = "faust-app", rate: float = 1.0, **kwargs: Any
    ) -> None:
        if datadog is None:
            raise ImproperlyConfigured(
                "DatadogMonitor", "the datadog client is not installed", "pip install 'agentstream[metrics]'"
            )
        super().__init__(host, port, prefix, rate, **kwargs)

    @cached_property
    def client(self) -> DatadogStatsClient:
        """The DogStatsd client (made on first use)."""
        return DatadogStatsClient(host=self.host, port=self.port, prefix=self.prefix, rate=self.rate)

    def emit(self, kind: str, metric: str, value: float, labels: Labels) -> None:
        if metric in _UNTAGGED:
            return
        if metric in _STATUS_IN_NAME:
            metric, labels = f"{metric}.{labels['status_code']}", {}
        client = self.client
        if kind == "incr":
            client.increment(metric, value=value, labels=labels)
        elif kind == "decr":
            client.decrement(metric, value=value, labels=labels)
        elif kind == "gauge":
            client.gauge(metric, value, labels=labels)
        else:
            client.timing(metric, value, labels=labels)
