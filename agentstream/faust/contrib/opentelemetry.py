"""``faust.contrib.opentelemetry``: Faust's OpenTelemetry tracing names on agentstream's sensor
(:mod:`agentstream.otel.tracing`): ``setup_opentelemetry(app, tracer=None)`` registers an
``OpenTelemetrySensor``. Unlike Faust's, agentstream writes the trace context into the headers of
what an agent sends (Faust left that to aiokafka's instrumentation; agentstream's producer does
not go through ``AIOKafkaProducer.send``), replacing any ``traceparent`` already there.
``instrument_asgi_app`` traces an ASGI app run beside the worker (:mod:`.asgi`)."""

from agentstream.otel.tracing import (
    INSTRUMENTATION_NAME,
    OpenTelemetrySensor,
    opentelemetry_available,
    sdk_is_configured,
    setup_opentelemetry,
)

from .asgi import instrument_asgi_app

__all__ = [
    "INSTRUMENTATION_NAME",
    "OpenTelemetrySensor",
    "opentelemetry_available",
    "sdk_is_configured",
    "setup_opentelemetry",
    "instrument_asgi_app",
]
