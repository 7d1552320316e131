"""Topics: a name, a partition count and the codecs for keys and values.

Sending encodes here, once, and hands bytes to the producer; the output record carries the
timestamp of the record being handled (event time flows downstream, as in Kafka Streams).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from mypy_extensions import mypyc_attr

from . import codecs
from .error_handling import production_failed
from .events import current_event
from .exceptions import RecordRejected
from .runtime import current_task
from .sensors import OutgoingMessage
from .transport.append import Appender
from .transport.base import Delivery, TopicSpec

if TYPE_CHECKING:
    from typing import Unpack

    from .types import AppT as App  # the App's interface: app.py imports this module
    from .types import TopicOptions

__all__ = ["Topic", "TopicGroup", "prepare_headers", "topic_configs", "observe_send", "report_delivery"]

_CALLBACKS: set[asyncio.Future[None]] = set()  # send(callback=) tasks waiting for their delivery


def prepare_headers(headers: Any) -> list[tuple[str, bytes]] | None:
    """Headers as the producer takes them: Faust accepts a mapping (``{"k": b"v"}``, what
    ``event.headers`` is) or ``(key, value)`` pairs; a ``str`` value is sent as its UTF-8 bytes,
    None as a header without a value. Anything else is refused here, naming the header, instead of
    failing inside the producer."""
    if headers is None:
        return None
    items = headers.items() if isinstance(headers, Mapping) else headers
    out: list[tuple[str, Any]] = []  # a None value is Kafka's null header value (as read, forwarded as is)
    for item in items:
        try:
            name, raw = item
        except (TypeError, ValueError):
            raise TypeError(f"headers: expected a mapping or (name, value) pairs, got the item {item!r}") from None
        if isinstance(raw, str):
            raw = raw.encode()
        elif raw is not None and not isinstance(raw, bytes):
            if not isinstance(raw, (bytearray, memoryview)):
                raise TypeError(f"header {name!r}: a value must be bytes or str, got {type(raw).__name__}")
            raw = bytes(raw)
        out.append((name.decode() if isinstance(name, bytes) else str(name), raw))
    return out or None


def _serializer_codec(serializer: Any) -> codecs.Codec:
    """A per-send ``key_serializer``/``value_serializer``: a codec name (``'json'``, ``'raw'``...) or a codec."""
    return codecs.get(serializer) if isinstance(serializer, str) else serializer  # type: ignore[no-any-return]


async def _call_when_delivered(delivery: Any, callback: Callable[[Any], Any]) -> None:
    """Faust's send ``callback``: called with the delivery once the record is delivered (not when
    the send fails, as in Faust); a coroutine it returns is awaited."""
    await delivery
    result = callback(delivery)
    if asyncio.iscoroutine(result):
        await result


def _after_delivery(delivery: Any, callback: Callable[[Any], Any]) -> None:
    task = asyncio.ensure_future(_call_when_delivered(delivery, callback))
    _CALLBACKS.add(task)
    task.add_done_callback(_CALLBACKS.discard)


def _as_bytes(data: Any) -> bytes | None:
    """A codec's output as bytes: it may give a bytearray or memoryview (the producer hashes and
    stores the key; compiled code would refuse anything but the declared bytes)."""
    return data if data is None or type(data) is bytes else bytes(data)


def topic_configs(topic: Topic) -> dict[str, str]:
    """The configs a topic is created with: its own ``config``, and the cleanup policy Kafka Streams
    and Faust give it: a repartition topic (internal, not compacted) ``delete``, as its records are
    purged once consumed; ``deleting=`` (Faust's) adds ``delete`` (``compact,delete`` when compacted).
    A plain compacted topic gets ``compact`` from the transport (:attr:`TopicSpec.compacted`)."""
    config = {str(key): str(value) for key, value in topic.config.items()}  # Faust's may hold numbers
    if "cleanup.policy" not in config:
        if topic.deleting:
            config["cleanup.policy"] = "compact,delete" if topic.compacted else "delete"
        elif topic.internal and not topic.compacted:
            config["cleanup.policy"] = "delete"
    return config


@mypyc_attr(allow_interpreted_subclasses=True)  # a public class: apps subclass it
class Topic:
    """A Kafka topic as the app sees it (Faust's ``app.topic(...)``)."""

    def __init__(self, app: App, name: str = "", **options: Unpack[TopicOptions]) -> None:
        from .types import TopicOptions as declared  # the runtime class (imported for typing only above)

        if "topics" in options:  # Faust's constructor: MyTopic(app, topics=["name"], ...)
            names = list(options.pop("topics") or ())  # type: ignore[typeddict-item]
            if len(names) != 1 or name:
                raise TypeError(f"Topic(topics=...) takes one topic name, got {names!r}; use app.topic(*names)")
            name = str(names[0])
        unknown = options.keys() - (declared.__optional_keys__ | declared.__required_keys__)
        if unknown:  # a misspelt option (valu_type=) must not be silently dropped
            raise TypeError(
                f"Topic() got unexpected keyword argument(s) {', '.join(map(repr, sorted(unknown)))}; "
                f"the options are {', '.join(sorted(declared.__optional_keys__))}"
            )
        key_type, key_serializer = options.get("key_type"), options.get("key_serializer")
        value_type, value_serializer = options.get("value_type"), options.get("value_serializer")
        internal = options.get("internal", False)
        self.app = app
        self.name = name
        self.key_type = key_type
        self.value_type = value_type
        self._partitions = options.get("partitions")
        self.internal = internal
        self.compacted = options.get("compacted", False)
        self.config = dict(options.get("config") or {})
        self.replicas: int | None = options.get("replicas") or None  # Faust's 0/None: the app's setting
        self.deleting: bool = bool(options.get("deleting"))
        # None (not given) and True: a record without a value reaches the agent as None
        self.allow_empty: bool | None = options.get("allow_empty")
        self.has_prefix: bool = bool(options.get("has_prefix"))
        self.key_serializer = key_serializer
        self.value_serializer = value_serializer
        self.key_codec = codecs.side_codec(key_type, key_serializer, app.key_serializer)
        if key_type is None and key_serializer is None and internal:
            self.key_codec = codecs.UntypedKeyCodec()  # repartition topics: raw keys, read back as text
        self.value_codec = codecs.side_codec(value_type, value_serializer, app.value_serializer)
        if app.class_setting("Serializers") is not None:  # Faust's Serializers setting: through app.serializers
            if not isinstance(self.key_codec, codecs.UntypedKeyCodec):
                self.key_codec = app.codec_through_serializers("key", key_type, key_serializer)
            self.value_codec = app.codec_through_serializers("value", value_type, value_serializer)
        # The app's producer while a plain send needs nothing but its synchronous append (the App
        # sets it on every topic it knows: App._refresh_plain_sends); None: the general path.
        self.plain_producer: Appender | None = app._plain_producer

    # Each codec behind the compiled codec interface (codecs.native), set with the codec: the send
    # path calls its dumps natively.
    _key_codec: codecs.Codec
    _key_native: codecs.BaseCodec
    _value_codec: codecs.Codec
    _value_native: codecs.BaseCodec

    @property
    def key_codec(self) -> codecs.Codec:
        return self._key_codec

    @key_codec.setter
    def key_codec(self, codec: codecs.Codec) -> None:
        self._key_codec = codec
        self._key_native = codecs.native(codec)

    @property
    def value_codec(self) -> codecs.Codec:
        return self._value_codec

    @value_codec.setter
    def value_codec(self, codec: codecs.Codec) -> None:
        self._value_codec = codec
        self._value_native = codecs.native(codec)

    @property
    def partitions(self) -> int:
        return self._partitions or self.app.settings.topic_partitions

    @partitions.setter
    def partitions(self, n: int) -> None:
        self._partitions = n

    @property
    def topics(self) -> tuple[str, ...]:
        """Faust compatibility: a topic object may stand for several names."""
        return (self.name,)

    def get_topic_name(self) -> str:
        return self.name

    pattern: str | None = None

    async def maybe_declare(self) -> None:
        """Create the topic now if it does not exist (Faust's ``topic.maybe_declare()``); the worker
        does this for every declared topic at start, so scripts that send first call it."""
        await self.declare()

    async def declare(self) -> None:
        await self.app.transport.ensure_topics([self.spec()])

    def spec(self) -> TopicSpec:
        """What the topic is created with when missing: see :func:`topic_configs`."""
        return TopicSpec(
            self.name, self.partitions, self.compacted, topic_configs(self), replication_factor=self.replicas
        )

    def encode(self, key: Any, value: Any) -> tuple[bytes | None, bytes | None]:
        # _as_bytes() inline (a codec's bytearray or memoryview made bytes): no call per record
        kb: Any = None if key is None else self._key_native.dumps(key)
        if kb is not None and type(kb) is not bytes:
            kb = bytes(kb)
        vb: Any = None if value is None else self._value_native.dumps(value)
        if vb is not None and type(vb) is not bytes:
            vb = bytes(vb)
        return kb, vb

    async def send(
        self,
        key: Any = None,
        value: Any = None,
        *,
        partition: int | None = None,
        timestamp: float | None = None,
        headers: Any = None,
        schema: Any = None,
        key_serializer: Any = None,
        value_serializer: Any = None,
        callback: Callable[[Any], Any] | None = None,
        force: bool = False,
    ) -> Delivery:
        """Encode and append to the producer's buffer; await the returned future for delivery.

        The worker flushes the producer before it commits, so agents need not wait for delivery.
        Faust's arguments: ``headers`` a mapping or ``(name, value)`` pairs; ``key_serializer`` /
        ``value_serializer`` (a codec name or codec; ``schema``'s when not given) replace the topic's
        codecs for this record; ``callback(delivery)`` once it is delivered; ``force`` sends at once,
        which every send here does (records are never held back until the commit).
        """
        if schema is not None:
            key_serializer = key_serializer or getattr(schema, "key_serializer", None)
            value_serializer = value_serializer or getattr(schema, "value_serializer", None)
        try:
            if key_serializer is None and value_serializer is None:
                kb, vb = self.encode(key, value)
            else:
                kb, vb = self.encode(
                    key if key_serializer is None else None, value if value_serializer is None else None
                )
                if key_serializer is not None and key is not None:
                    kb = _as_bytes(_serializer_codec(key_serializer).dumps(key))
                if value_serializer is not None and value is not None:
                    vb = _as_bytes(_serializer_codec(value_serializer).dumps(value))
        except Exception as exc:  # not serialisable: the app's production_exception_handler decides
            failed: Delivery = await production_failed(self.app, exc, self.name, key, value)
            return failed
        if callback is not None:
            sent = await self.send_raw(kb, vb, partition=partition, timestamp=timestamp, headers=headers)
            _after_delivery(sent, callback)
            return sent
        # The common case appends without a coroutine below this one (the producer's synchronous
        # append, with the current event's timestamp); send_raw() is the general path.
        if timestamp is None and headers is None:
            producer = self.plain_producer
            if producer is not None:
                event = current_event()
                ts = -1 if event is None else event.message.timestamp_ms  # -1: none (format 0 records)
                try:
                    delivery: Delivery | None = producer.send_now(
                        self.name, kb, vb, partition, ts if ts >= 0 else None, None
                    )
                except RecordRejected as exc:  # the memory producer refuses at once
                    rejected: Delivery = await production_failed(self.app, exc, self.name, key, value)
                    return rejected
                if delivery is not None:
                    return delivery
        return await self.send_raw(kb, vb, partition=partition, timestamp=timestamp, headers=headers)

    async def send_raw(
        self,
        key: bytes | None,
        value: bytes | None,
        *,
        partition: int | None = None,
        timestamp: float | None = None,
        headers: Any = None,
    ) -> Delivery:
        if headers is not None:
            headers = prepare_headers(headers)
        if timestamp is None:
            event = current_event()
            ts_ms = event.message.timestamp_ms if event is not None else None
            if ts_ms is not None and ts_ms < 0:  # a record without one (message format 0)
                ts_ms = None
        else:
            ts_ms = int(timestamp * 1000)
        app = self.app
        states: dict[Any, Any] | None = None
        if app.sensors._sensors or app.on_produce_message.receivers:  # Faust's signal and sensor hooks
            states, headers = observe_send(app, self.name, key, value, partition, ts_ms, headers)
        task = current_task.get()
        delivery: Delivery
        try:
            if task is not None and task.txn is not None:  # exactly_once: into the task's transaction
                delivery = await task.txn.send(
                    self.name, key, value, partition=partition, timestamp_ms=ts_ms, headers=headers
                )
            else:
                producer = self.app.producer if self.app._producer_started else await self.app.start_producer()
                now = producer.send_now(self.name, key, value, partition, ts_ms, headers)
                if now is not None:
                    delivery = now
                else:
                    delivery = await producer.send(
                        self.name, key, value, partition=partition, timestamp_ms=ts_ms, headers=headers
                    )
        except RecordRejected as exc:  # refused for good at the send (too large, no such partition)
            delivery = await production_failed(self.app, exc, self.name, key, value)
        if states:
            report_delivery(app, delivery, states)
        return delivery

    def send_soon(
        self,
        *,
        key: Any = None,
        value: Any = None,
        partition: int | None = None,
        timestamp: float | None = None,
        headers: Any = None,
        schema: Any = None,
        key_serializer: Any = None,
        value_serializer: Any = None,
        callback: Callable[[Any], Any] | None = None,
        force: bool = False,
        eager_partitioning: bool = False,
    ) -> asyncio.Future[Any]:
        """Faust's ``topic.send_soon(...)``: send from code that cannot await. The record is
        queued for the producer in call order; the returned future gives its RecordMetadata.
        Needs a running event loop (the worker's). The arguments are :meth:`send`'s; the partition
        is chosen when the record is appended, at once (``eager_partitioning`` changes nothing)."""
        options = {
            "schema": schema,
            "key_serializer": key_serializer,
            "value_serializer": value_serializer,
            "callback": callback,
        }
        return asyncio.ensure_future(
            _delivered(self, key, value, partition, timestamp, prepare_headers(headers), options)
        )

    def derive(self, **kwargs: Any) -> Topic:
        """Faust's ``topic.derive(...)``: a topic with this one's types, serializers, partitions
        and config, any of them overridden by keyword; ``topics=`` names it, ``prefix``/``suffix``
        decorate this topic's names (not a pattern's)."""
        prefix, suffix = kwargs.pop("prefix", ""), kwargs.pop("suffix", "")
        names = list(kwargs.pop("topics", None) or self.topics)
        if prefix or suffix:
            if self.pattern:
                raise ValueError("Cannot add prefix/suffix to Topic with pattern")
            names = [f"{prefix}{name}{suffix}" for name in names]
        options: dict[str, Any] = {
            "key_type": self.key_type,
            "value_type": self.value_type,
            "key_serializer": self.key_serializer,
            "value_serializer": self.value_serializer,
            "partitions": self._partitions,
            "internal": self.internal,
            "compacted": self.compacted,
            "config": dict(self.config) or None,
            "replicas": self.replicas,
            "deleting": self.deleting or None,
        }
        compacting = kwargs.pop("compacting", None)
        if compacting is not None:
            options["compacted"] = bool(compacting)
        options.update({k: v for k, v in kwargs.items() if v is not None})
        if type(self) in (Topic, TopicGroup):
            return self.app.topic(*names, **options)
        derived = type(self)(self.app, names[0], **options)  # an app's subclass, as Faust keeps it
        return self.app.topics.setdefault(derived.name, derived)

    def stream(self, **kwargs: Any) -> Any:
        """Faust's ``topic.stream()``: ``app.stream(topic)``."""
        return self.app.stream(self, **kwargs)

    # -- Faust's decode-error hooks: the worker awaits them with the error and the record --------
    async def on_key_decode_error(self, exc: Exception, message: Any) -> None:
        """A record's key did not decode (``exc`` a KeyDecodeError). By default on_decode_error,
        then the app's ``on_decode_error`` policy; an override that returns skips the record."""
        await self.on_decode_error(exc, message)
        raise exc

    async def on_value_decode_error(self, exc: Exception, message: Any) -> None:
        """A record's value did not decode (``exc`` a ValueDecodeError); as on_key_decode_error."""
        await self.on_decode_error(exc, message)
        raise exc

    async def on_decode_error(self, exc: Exception, message: Any) -> None:
        """Called by both default hooks (to observe errors); does nothing by default."""

    def __repr__(self) -> str:
        return f"<Topic {self.name} partitions={self.partitions}>"


def observe_send(
    app: App,
    topic: str,
    key: bytes | None,
    value: bytes | None,
    partition: int | None,
    ts_ms: int | None,
    headers: Sequence[tuple[str, bytes]] | None,
) -> tuple[dict[Any, Any], list[tuple[str, bytes]] | None]:
    """Faust's ``on_produce_message`` signal, then the sensors' ``on_send_initiated`` with the
    record as an :class:`~agentstream.sensors.OutgoingMessage` (a tracing sensor puts the trace
    context in its headers). Returns the sensors' states (for the delivery's
    ``on_send_completed``/``on_send_error``) and the headers to send."""
    app.on_produce_message.send(
        app,
        key=key,
        value=value,
        partition=partition,
        timestamp=None if ts_ms is None else ts_ms / 1000.0,
        headers=headers,
    )
    if not app.sensors._sensors:
        return {}, None if headers is None else list(headers)
    message = OutgoingMessage(
        topic, key, value, partition, None if ts_ms is None else ts_ms / 1000.0, list(headers or ())
    )
    states = app.sensors.on_send_initiated(
        app._producer, topic, message, len(key) if key else 0, len(value) if value else 0
    )
    return states, message.headers or None


def report_delivery(app: App, delivery: Delivery, states: dict[Any, Any]) -> None:
    """When the delivery settles: Faust's ``on_send_completed`` (with the record's metadata) or
    ``on_send_error``, each sensor with the state its ``on_send_initiated`` returned."""
    sensors, producer = app.sensors, app._producer

    def settled(done: Any) -> None:
        if done.cancelled():
            sensors.on_send_error(producer, asyncio.CancelledError("the delivery was cancelled"), states)
            return
        exc = done.exception()
        if exc is not None:
            sensors.on_send_error(producer, exc, states)
        else:
            sensors.on_send_completed(producer, states, done.result())

    add = getattr(delivery, "add_done_callback", None)
    if add is not None:
        add(settled)
    else:  # a delivery without callbacks: wait for it beside the sender
        asyncio.ensure_future(_settle(delivery, settled))


async def _settle(delivery: Delivery, settled: Callable[[Any], None]) -> None:
    try:
        await delivery
    except BaseException:
        pass
    settled(delivery)


async def _delivered(
    topic: Topic,
    key: Any,
    value: Any,
    partition: int | None,
    timestamp: float | None,
    headers: list[tuple[str, bytes]] | None,
    options: dict[str, Any],
) -> Any:
    """:meth:`Topic.send_soon`'s task: the send (appended at the task's first step, so in call
    order), then its delivery."""
    delivery = await topic.send(
        key,
        value,
        partition=partition,
        timestamp=timestamp,
        headers=headers,
        schema=options["schema"],
        key_serializer=options["key_serializer"],
        value_serializer=options["value_serializer"],
        callback=options["callback"],
    )
    return await delivery


@mypyc_attr(allow_interpreted_subclasses=True)  # public too (Faust's faust.TopicGroup)
class TopicGroup(Topic):
    """``app.topic("a", "b")`` or ``app.topic(pattern="^a-.*")``: several topics as one source.

    An agent over it reads every member (one task per partition number, as for any list of
    topics); a pattern's members are the existing topics whose names match when the worker starts
    (topics created later are read after the next worker start: documented in the migration guide)."""

    def __init__(
        self,
        app: App,
        names: Sequence[str],
        members: Sequence[Topic],
        *,
        pattern: str | None = None,
        options: dict[str, Any] | None = None,
    ) -> None:
        opts = dict(options or {})
        super().__init__(
            app,
            names[0] if names else f"pattern:{pattern}",
            key_type=opts.get("key_type"),
            value_type=opts.get("value_type"),
            key_serializer=opts.get("key_serializer"),
            value_serializer=opts.get("value_serializer"),
        )
        self.names = tuple(names)
        self.members = list(members)
        self.pattern = pattern
        self.options = opts

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.members) if self.members else self.names

    async def declare(self) -> None:
        await self.app.transport.ensure_topics([t.spec() for t in self.members])

    async def send(
        self,
        key: Any = None,
        value: Any = None,
        *,
        partition: int | None = None,
        timestamp: float | None = None,
        headers: Any = None,
        schema: Any = None,
        key_serializer: Any = None,
        value_serializer: Any = None,
        callback: Callable[[Any], Any] | None = None,
        force: bool = False,
    ) -> Delivery:
        from .exceptions import TopologyError

        raise TopologyError(
            f"cannot send to {self!r}: it stands for several topics; send to one of "
            f"app.topic(name) for name in {list(self.topics)}"
        )

    def __repr__(self) -> str:
        what = f"pattern={self.pattern!r}" if self.pattern is not None else f"names={list(self.names)}"
        return f"<TopicGroup {what}>"
