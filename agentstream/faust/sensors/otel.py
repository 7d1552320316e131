"""``faust.sensors.otel``: Faust's ``OpenTelemetryMonitor`` (and its ``OTelMetrics``) on agentstream's
(:mod:`agentstream.otel.metrics`): set ``app.monitor = OpenTelemetryMonitor(meter=...)`` for Faust's
instruments; ``monitor.observe_worker(app)`` (or ``setup_opentelemetry_metrics(app)``) adds the
worker's lag, commits, restore progress, rebalances and RocksDB memory. Needs
``pip install 'agentstream[otel]'``."""

from agentstream.otel.metrics import OpenTelemetryMonitor, OTelMetrics, setup_opentelemetry_metrics

__all__ = ["OTelMetrics", "OpenTelemetryMonitor", "setup_opentelemetry_metrics"]
