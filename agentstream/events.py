"""The event an agent is handling: the decoded key and value plus where the record came from.

``current_event()`` is a context variable because each agent instance runs in its own asyncio
task: sends made while handling a record can read its timestamp and reply address without the
agent passing them around.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from types import TracebackType
from typing import Any, Final, Protocol

from mypy_extensions import mypyc_attr

from .transport.base import TP, Message

__all__ = ["Event", "current_event", "streams_in_hand"]


class _Hand(Protocol):
    """What :meth:`Event.ack` and :meth:`Event.send` need of a stream (agentstream.streams.Stream)."""

    def ack(self, event: Event) -> Any: ...  # truthy when this call acknowledged it

    def channel_named(self, name: str) -> Any: ...


streams_in_hand: Final[ContextVar[list[Any] | None]] = ContextVar("agentstream_streams", default=None)
"""Set by a stream task for each agent instance: every stream the agent makes (root, filtered,
grouped, joined) registers here, so the error policy, acks and replies act on the records in hand
of whichever stream the agent iterates (``event.ack()`` too). Defined here, below the streams,
so an event can reach the stream holding it; :mod:`agentstream.streams` re-exports it."""

_USE_EXISTING: Final = object()  # Event.send/forward: keep the event's own key, value or headers


def _refuse_options(call: str, options: dict[str, Any]) -> None:
    """Faust's other ``event.send``/``forward`` arguments (serializers, schema, callback, force):
    named and refused rather than accepted and ignored."""
    if options:
        raise TypeError(
            f"event.{call}() does not take {', '.join(sorted(options))}: the channel's codecs apply. "
            "Fix: send through app.send(channel, ..., key_serializer=..., value_serializer=...) instead"
        )


@mypyc_attr(allow_interpreted_subclasses=True)  # a public class: apps subclass it (Faust's Event setting)
class Event:
    """One record handed to an agent (Faust's ``Event``); ``message`` is the raw consumer record.
    An app's ``Event`` setting names a subclass: the events its agents and streams get are of it."""

    __slots__ = ("key", "value", "message", "tp", "_headers")

    def __init__(self, key: Any, value: Any, message: Message, tp: TP | None = None) -> None:
        self.key = key
        self.value = value
        self.message = message
        self.tp = TP(message.topic, message.partition) if tp is None else tp
        self._headers: dict[str, Any] | None = None  # made on first read: most agents never look

    @property
    def topic(self) -> str:
        return self.message.topic

    @property
    def partition(self) -> int:
        return self.message.partition

    @property
    def offset(self) -> int:
        return self.message.offset

    @property
    def timestamp(self) -> float:
        """Event time in seconds, like Faust."""
        return self.message.timestamp_ms / 1000.0

    @property
    def headers(self) -> dict[str, Any]:
        """The record's headers as a dict, like Faust's ``event.headers`` (the last value of a
        repeated name wins; ``event.message.headers`` keeps the list of pairs). It is this event's
        own dict: changes to it go with :meth:`send`."""
        headers = self._headers
        if headers is None:
            headers = self._headers = dict(self.message.headers or ())
        return headers

    @headers.setter
    def headers(self, headers: Mapping[str, Any]) -> None:
        self._headers = dict(headers)

    def header(self, name: str) -> bytes | None:
        # typed Any on purpose: a header from outside may carry a null value (Kafka allows it), which
        # the compiled build would refuse while unpacking a tuple[str, bytes]
        headers: Any = self.message.headers or ()
        for item in headers:
            if item[0] == name:
                value: Any = item[1]
                return value if value is None or isinstance(value, bytes) else None
        return None

    def ack(self) -> bool:
        """Acknowledge the event now (Faust's ``event.ack()``): its offset may be committed once
        the records before it are. True when this call acknowledged it; False when it was already
        acknowledged or no stream of the running agent holds it."""
        for stream in streams_in_hand.get() or ():
            if stream.ack(self):
                return True
        return False

    async def __aenter__(self) -> Event:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """``async with event:`` acknowledges it on the way out, as Faust does (errors propagate)."""
        self.ack()

    async def send(
        self,
        channel: Any,
        key: Any = _USE_EXISTING,
        value: Any = _USE_EXISTING,
        partition: int | None = None,
        timestamp: float | None = None,
        headers: Any = _USE_EXISTING,
        **kwargs: Any,
    ) -> Any:
        """Send this event's key and value (or the given ones) to ``channel`` (a topic, channel,
        agent or topic name), encoded by that channel; the headers are :attr:`headers`.
        Faust's serializer options (``schema``, ``key_serializer``...) are refused: the
        channel's codecs apply (``app.send`` takes serializers)."""
        _refuse_options("send", kwargs)
        return await self._send(
            channel,
            self.key if key is _USE_EXISTING else key,
            self.value if value is _USE_EXISTING else value,
            partition,
            timestamp,
            self.headers if headers is _USE_EXISTING else headers,
            False,
        )

    async def forward(
        self,
        channel: Any,
        key: Any = _USE_EXISTING,
        value: Any = _USE_EXISTING,
        partition: int | None = None,
        timestamp: float | None = None,
        headers: Any = _USE_EXISTING,
        **kwargs: Any,
    ) -> Any:
        """Send the record as it was read (``message.key``/``message.value``, not re-encoded)
        to ``channel``, with ``message.headers`` (Faust's ``event.forward``)."""
        _refuse_options("forward", kwargs)
        message = self.message
        return await self._send(
            channel,
            message.key if key is _USE_EXISTING else key,
            message.value if value is _USE_EXISTING else value,
            partition,
            timestamp,
            (message.headers or None) if headers is _USE_EXISTING else headers,
            key is _USE_EXISTING and value is _USE_EXISTING,
        )

    async def _send(
        self,
        channel: Any,
        key: Any,
        value: Any,
        partition: int | None,
        timestamp: float | None,
        headers: Any,
        raw: bool,
    ) -> Any:
        if isinstance(channel, str):
            channel = self._channel_named(channel)
        if isinstance(headers, Mapping):
            headers = list(headers.items())
        if not headers:
            headers = None
        send_raw = getattr(channel, "send_raw", None) if raw else None
        if send_raw is not None:  # a topic: the bytes as they were read
            return await send_raw(key, value, partition=partition, timestamp=timestamp, headers=headers)
        return await channel.send(key=key, value=value, partition=partition, timestamp=timestamp, headers=headers)

    def _channel_named(self, name: str) -> Any:
        for stream in streams_in_hand.get() or ():
            return stream.channel_named(name)
        raise LookupError(
            f"event.send({name!r}): a topic name is resolved through the running agent's app; "
            f"outside an agent pass the topic object (app.topic({name!r}))"
        )

    def where(self) -> str:
        """``topic[partition]@offset``, the form every log line about a record uses."""
        m = self.message
        return f"{m.topic}[{m.partition}]@{m.offset}"

    def __repr__(self) -> str:
        return f"<Event {self.where()} key={self.key!r} value={self.value!r}>"


_current: Final[ContextVar[Event | None]] = ContextVar("agentstream_current_event", default=None)


current_event: Final = _current.get
"""``current_event()``: the event the calling agent instance is handling, or None outside an
agent. The ContextVar's own ``get`` (a C call, no Python frame): every send and table access
reads it once per record."""


set_current_event: Final = _current.set
"""Make ``event`` the calling agent instance's current event: the ContextVar's own ``set``, a C
call with no Python frame, since streams call it once per record."""
