"""``faust.sensors``: the Sensor base class, the delegate (``app.sensors``) and the Monitor
(``app.monitor``); Faust's client monitors are its submodules ``prometheus`` (prometheus_client),
``statsd`` (statsd) and ``datadog`` (datadog), each needing its client library
(``pip install agentstream[metrics]``); ``otel`` is OpenTelemetry's (``pip install agentstream[otel]``)."""

from agentstream.sensors import Monitor, Sensor, SensorDelegate, TableState

__all__ = ["Monitor", "Sensor", "SensorDelegate", "TableState"]
