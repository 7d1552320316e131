"""Tracing through OpenTelemetry: a span per record an agent handles, joined across topics.

:func:`setup_opentelemetry` registers an :class:`OpenTelemetrySensor` (Faust's
``faust.contrib.opentelemetry`` names). Then, for every record handed to an agent:

* a ``{topic} process`` span (kind CONSUMER) starts when the agent takes the record, parented to
  the context in the record's W3C ``traceparent`` header (the producer's span), and ends when the
  agent asks for the next record (the record is acknowledged); it is the current span meanwhile,
  so the agent's own spans nest under it;
* every send made while it is current (``topic.send``, ``agent.send``, a ``group_by``/``through``
  forward, a yielded reply) carries its context: the propagator's headers replace any the record
  already had (a forward copies the input's headers), so a record never has two ``traceparent``;
* ``agent.ask()`` is an ``{agent} ask`` span (kind CLIENT) around the request and the wait: the
  agent's ``process`` span is its child, and the reply, read by this process's reply reader, is a
  ``{reply topic} receive`` span under the replying agent's span;
* a table write (``table[k] = v``, ``del table[k]``) is an event (``table set`` / ``table del``,
  attribute ``agentstream.table``) on the current span.

It is a sensor: with no sensor registered the record path has no hook call at all (the task,
topics and tables switch to their sensed paths only when one is added), so tracing that is not
set up costs nothing. As OpenTelemetry asks of libraries, nothing here configures an SDK: spans
are no-ops until the application installs a TracerProvider (or passes ``tracer=``).

Headers come from whoever wrote the record: a ``traceparent`` longer than
:data:`MAX_HEADER_VALUE` bytes, or not valid W3C, is ignored (the span starts a new trace).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from .._version import __version__
from ..sensors import Sensor
from ..transport.base import TP

try:
    from opentelemetry import context as otel_context
    from opentelemetry import propagate, trace
    from opentelemetry.propagators.textmap import Getter
    from opentelemetry.trace import SpanKind, Status, StatusCode
except ImportError:  # pragma: no cover - the otel extra is not installed
    otel_context = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

__all__ = [
    "OpenTelemetrySensor",
    "setup_opentelemetry",
    "opentelemetry_available",
    "sdk_is_configured",
    "inject_context",
    "extract_context",
    "INSTRUMENTATION_NAME",
    "MAX_HEADER_VALUE",
]

INSTRUMENTATION_NAME = "agentstream"
"""The instrumentation scope of the spans made here."""
MAX_HEADER_VALUE = 512
"""Longest trace header value read from a record (a W3C traceparent is 55 characters)."""
MAX_KEY_ATTRIBUTE = 256
"""A record key longer than this (in characters) is cut in the span's key attribute."""
_NOOP_PROVIDERS = frozenset({"ProxyTracerProvider", "NoOpTracerProvider", "DefaultTracerProvider"})


def opentelemetry_available() -> bool:
    """True when the OpenTelemetry API is importable (the ``otel`` extra)."""
    return otel_context is not None


def sdk_is_configured() -> bool:
    """True when the application installed a real TracerProvider (not the API's proxy/no-op)."""
    if otel_context is None:
        return False
    return type(trace.get_tracer_provider()).__name__ not in _NOOP_PROVIDERS


class _HeadersGetter(Getter[Any] if otel_context is not None else object):  # type: ignore[misc]
    """Reads a trace context from Kafka headers (``(name, bytes)`` pairs, names compared without
    case, the first one wins); a value over MAX_HEADER_VALUE bytes is not read."""

    def get(self, carrier: Any, key: str) -> list[str] | None:
        for item in carrier or ():
            try:
                name, value = item
            except (TypeError, ValueError):
                continue
            if not isinstance(name, str) or name.lower() != key:
                continue
            if isinstance(value, (bytes, bytearray)) and len(value) <= MAX_HEADER_VALUE:
                return [bytes(value).decode("utf-8", "replace")]
            if isinstance(value, str) and len(value) <= MAX_HEADER_VALUE:
                return [value]
            return None
        return None

    def keys(self, carrier: Any) -> list[str]:
        return [item[0] for item in carrier or () if isinstance(item, tuple) and isinstance(item[0], str)]


_GETTER = _HeadersGetter() if otel_context is not None else None


def extract_context(headers: Iterable[tuple[str, bytes]] | None) -> Any:
    """The OpenTelemetry context in a record's headers (the global propagator's fields: W3C
    ``traceparent``/``tracestate`` by default); an empty context when there is none."""
    return propagate.extract(list(headers or ()), getter=_GETTER)


def inject_context(headers: list[tuple[str, bytes]], context: Any = None) -> list[tuple[str, bytes]]:
    """Put the current (or ``context``'s) trace context into ``headers``, in place, replacing any
    header of the same name the list already had (never two ``traceparent``). Nothing changes
    when there is no valid span to carry."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=context)
    if carrier:
        names = {name.lower() for name in carrier}
        headers[:] = [item for item in headers if not (isinstance(item[0], str) and item[0].lower() in names)]
        headers.extend((name, value.encode("utf-8")) for name, value in carrier.items())
    return headers


def _agent(stream: Any) -> Any:
    return getattr(getattr(stream, "_input", None), "agent", None)


MAX_SKIPPED = 10_000
"""Bound of the spans ended while not current whose context a later restore skips (see _Contexts)."""


class _Contexts:
    """Makes a span current and, when it ends, the context before it again.

    Records of a batch (``stream.take``) or acknowledged out of order (``noack``) end while another
    record's span is current: that one is left current, and the ended span's context is skipped when
    the span above it ends (contextvars tokens would restore the ended span's context instead)."""

    def __init__(self) -> None:
        self._skipped: dict[Any, Any] = {}  # ended span -> the context before it

    def enter(self, span: Any) -> dict[str, Any]:
        previous = otel_context.get_current()
        otel_context.attach(trace.set_span_in_context(span, previous))
        return {"span": span, "previous": previous}

    def leave(self, state: Any, error: BaseException | None = None) -> None:
        if not isinstance(state, dict):
            return
        span, previous = state.pop("span", None), state.pop("previous", None)
        if span is None:
            return
        try:
            if trace.get_current_span() is span:
                context = previous
                while True:  # past the spans that ended under this one
                    before = self._skipped.pop(trace.get_current_span(context), None)
                    if before is None:
                        break
                    context = before
                otel_context.attach(context)
            else:
                if len(self._skipped) >= MAX_SKIPPED:
                    self._skipped.clear()
                self._skipped[span] = previous
        except Exception as exc:  # pragma: no cover - telemetry never stops processing
            log.debug("OpenTelemetry: could not restore the context: %r", exc)
        try:
            if error is not None:
                span.record_exception(error)
                span.set_status(Status(StatusCode.ERROR, type(error).__name__))
            span.end()
        except Exception as exc:  # pragma: no cover
            log.debug("OpenTelemetry: could not end span: %r", exc)


class OpenTelemetrySensor(Sensor):
    """Spans for the records agents handle, asks and replies; trace context on every send.

    ``tracer``: the tracer to use; by default the global provider's (resolved when first used,
    so an SDK configured after the app is imported is the one used)."""

    def __init__(self, *, tracer: Any = None, **kwargs: Any) -> None:
        if kwargs:
            raise TypeError(f"OpenTelemetrySensor() got unexpected keyword argument(s) {', '.join(sorted(kwargs))}")
        if otel_context is None:
            from ..exceptions import ImproperlyConfigured

            raise ImproperlyConfigured(
                "OpenTelemetrySensor", "opentelemetry-api is not installed", "pip install 'agentstream[otel]'"
            )
        self._explicit_tracer = tracer
        self._tracer: Any = None
        self._contexts = _Contexts()

    @property
    def tracer(self) -> Any:
        """The tracer spans are made with."""
        if self._explicit_tracer is not None:
            return self._explicit_tracer
        if self._tracer is None:
            # the API's proxy tracer follows a provider the application sets later
            self._tracer = trace.get_tracer(INSTRUMENTATION_NAME, __version__)
        return self._tracer

    # -- records handled by agents ---------------------------------------------------------------
    def _process_attributes(self, tp: TP, offset: int, stream: Any, event: Any) -> dict[str, Any]:
        attributes: dict[str, Any] = {
            "messaging.system": "kafka",
            "messaging.operation.name": "process",
            "messaging.operation.type": "process",
            "messaging.destination.name": tp.topic,
            "messaging.destination.partition.id": str(tp.partition),
            "messaging.kafka.message.offset": offset,
        }
        agent = _agent(stream)
        if agent is not None:
            attributes["agentstream.agent"] = str(agent.name)
            group = getattr(getattr(agent, "app", None), "id", None)
            if group:
                attributes["messaging.consumer.group.name"] = str(group)
        key = getattr(event.message, "key", None)
        if key is not None:  # the convention: not set for a null key
            text = bytes(key).decode("utf-8", "replace") if isinstance(key, (bytes, bytearray)) else str(key)
            attributes["messaging.kafka.message.key"] = text[:MAX_KEY_ATTRIBUTE]
        return attributes

    def on_stream_event_in(self, tp: TP, offset: int, stream: Any, event: Any) -> Any:
        """Start the record's ``process`` span under the producer's context, and make it current."""
        try:
            parent = extract_context(getattr(event.message, "headers", None))
            span = self.tracer.start_span(
                f"{tp.topic} process",
                context=parent,
                kind=SpanKind.CONSUMER,
                attributes=self._process_attributes(tp, offset, stream, event),
            )
            return self._contexts.enter(span)
        except Exception as exc:  # telemetry never stops processing
            log.debug("OpenTelemetry: could not start a process span: %r", exc)
            return None

    def on_stream_event_out(self, tp: TP, offset: int, stream: Any, event: Any, state: Any = None) -> None:
        """The record is acknowledged: end its span."""
        self._contexts.leave(state)

    # -- sends -----------------------------------------------------------------------------------
    def on_send_initiated(self, producer: Any, topic: str, message: Any, keysize: int, valsize: int) -> Any:
        """The record about to be sent carries the current span's context."""
        headers = getattr(message, "headers", None)
        if isinstance(headers, list):
            try:
                inject_context(headers)
            except Exception as exc:  # pragma: no cover
                log.debug("OpenTelemetry: could not inject the trace context: %r", exc)
        return None

    # -- tables ------------------------------------------------------------------------------------
    def _table_event(self, name: str, table: Any) -> None:
        span = trace.get_current_span()
        if span.is_recording():
            span.add_event(name, {"agentstream.table": str(getattr(table, "name", table))})

    def on_table_set(self, table: Any, key: Any, value: Any) -> None:
        self._table_event("table set", table)

    def on_table_del(self, table: Any, key: Any) -> None:
        self._table_event("table del", table)

    # -- request/reply -----------------------------------------------------------------------------
    def on_ask_start(self, agent: Any, correlation_id: str) -> Any:
        """``agent.ask()``: an ``ask`` span, current while the request is sent and the reply awaited."""
        try:
            span = self.tracer.start_span(
                f"{agent.name} ask",
                kind=SpanKind.CLIENT,
                attributes={
                    "messaging.system": "kafka",
                    "messaging.destination.name": str(agent.channel.name),
                    "messaging.message.conversation_id": correlation_id,
                    "agentstream.agent": str(agent.name),
                },
            )
            return self._contexts.enter(span)
        except Exception as exc:  # pragma: no cover
            log.debug("OpenTelemetry: could not start an ask span: %r", exc)
            return None

    def on_ask_end(self, agent: Any, state: Any, error: BaseException | None) -> None:
        self._contexts.leave(state, error)

    def on_reply_received(self, tp: TP, offset: int, message: Any) -> None:
        """A reply reached this process: a ``receive`` span under the replying agent's span."""
        try:
            span = self.tracer.start_span(
                f"{tp.topic} receive",
                context=extract_context(getattr(message, "headers", None)),
                kind=SpanKind.CONSUMER,
                attributes={
                    "messaging.system": "kafka",
                    "messaging.operation.name": "receive",
                    "messaging.operation.type": "receive",
                    "messaging.destination.name": tp.topic,
                    "messaging.destination.partition.id": str(tp.partition),
                    "messaging.kafka.message.offset": offset,
                },
            )
            span.end()
        except Exception as exc:  # pragma: no cover
            log.debug("OpenTelemetry: could not record a reply span: %r", exc)


def setup_opentelemetry(app: Any, *, tracer: Any = None) -> OpenTelemetrySensor | None:
    """Register an :class:`OpenTelemetrySensor` on ``app`` (Faust's). Returns it, or None when the
    OpenTelemetry API is not installed (logged). An app that has one already gets that one back."""
    if not opentelemetry_available():
        log.warning("OpenTelemetry: opentelemetry-api is not installed (pip install 'agentstream[otel]'): no tracing")
        return None
    for sensor in app.sensors:
        if isinstance(sensor, OpenTelemetrySensor):
            if tracer is not None:
                sensor._explicit_tracer = tracer
            return sensor
    sensor = OpenTelemetrySensor(tracer=tracer)
    app.sensors.add(sensor)
    return sensor
