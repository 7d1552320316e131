"""OpenTelemetry for agentstream (the ``otel`` extra: ``pip install 'agentstream[otel]'``).

* :mod:`agentstream.otel.tracing`: :class:`OpenTelemetrySensor` / :func:`setup_opentelemetry`, a
  span per record an agent handles, parented through the W3C ``traceparent`` header, carried on
  every send made while the record is handled (Faust's ``faust.contrib.opentelemetry`` names).
* :mod:`agentstream.otel.metrics`: :class:`OpenTelemetryMonitor` (Faust's
  ``faust.sensors.otel`` names) plus the worker's own numbers (lag, commits, restore, rebalances,
  RocksDB memory) as OpenTelemetry instruments.

Both are sensors: with neither registered, the record path does not know they exist. Importing
this package imports no OpenTelemetry module; its submodules need ``opentelemetry-api`` (and the
application configures an SDK, as OpenTelemetry asks of libraries).
"""
