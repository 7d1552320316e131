"""Topics: a name, a partition count and the codecs for keys and values.

Sending encodes here, once, and hands bytes to the producer; the output record carries the
timestamp of the record being handled (event time flows downstream, as in Kafka Streams).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from . import codecs
from .events import current_event
from .transport.base import Delivery, TopicSpec
from .runtime import current_task

if TYPE_CHECKING:
    from .app import App

__all__ = ["Topic"]



class Topic:
    """A Kafka topic as the app sees it (Faust's ``app.topic(...)``)."""

    def __init__(
        self,
        app: "App",
        name: str,
        *,
        key_type: Any = None,
        value_type: Any = None,
        partitions: int | None = None,
        key_serializer: str | None = None,
        value_serializer: str | None = None,
        internal: bool = False,
        compacted: bool = False,
        config: dict[str, str] | None = None,
    ) -> None:
        self.app = app
        self.name = name
        self.key_type = key_type
        self.value_type = value_type
        self._partitions = partitions
        self.internal = internal
        self.compacted = compacted
        self.config = dict(config or {})
        self.key_serializer = key_serializer
        self.value_serializer = value_serializer
        self.key_codec = codecs.side_codec(key_type, key_serializer, app.key_serializer)
        if key_type is None and key_serializer is None and internal:
            self.key_codec = codecs.UntypedKeyCodec()  # repartition topics: raw keys, read back as text
        self.value_codec = codecs.side_codec(value_type, value_serializer, app.value_serializer)

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

    def spec(self) -> TopicSpec:
        return TopicSpec(self.name, self.partitions, self.compacted, self.config)

    def encode(self, key: Any, value: Any) -> tuple[bytes | None, bytes | None]:
        kb = None if key is None else self.key_codec.dumps(key)
        vb = None if value is None else self.value_codec.dumps(value)
        return kb, vb

    async def send(
        self,
        key: Any = None,
        value: Any = None,
        *,
        partition: int | None = None,
        timestamp: float | None = None,
        headers: Sequence[tuple[str, bytes]] | None = None,
    ) -> Delivery:
        """Encode and append to the producer's buffer; await the returned future for delivery.

        The worker flushes the producer before it commits, so agents need not wait for delivery.
        """
        kb, vb = self.encode(key, value)
        return await self.send_raw(kb, vb, partition=partition, timestamp=timestamp, headers=headers)

    async def send_raw(
        self,
        key: bytes | None,
        value: bytes | None,
        *,
        partition: int | None = None,
        timestamp: float | None = None,
        headers: Sequence[tuple[str, bytes]] | None = None,
    ) -> Delivery:
        if timestamp is None:
            event = current_event()
            ts_ms = event.message.timestamp if event is not None else None
        else:
            ts_ms = int(timestamp * 1000)
        task = current_task.get()
        if task is not None and task.txn is not None:  # exactly_once: into the task's transaction
            return await task.txn.send(self.name, key, value, partition=partition, timestamp_ms=ts_ms, headers=headers)
        producer = self.app.producer if self.app._producer_started else await self.app.start_producer()
        send_now = getattr(producer, "send_now", None)  # kafka://: the synchronous fast path
        if send_now is not None:
            delivery: Delivery | None = send_now(self.name, key, value, partition, ts_ms, headers)
            if delivery is not None:
                return delivery
        return await producer.send(self.name, key, value, partition=partition, timestamp_ms=ts_ms, headers=headers)

    def __repr__(self) -> str:
        return f"<Topic {self.name} partitions={self.partitions}>"
