"""Topic.send appends a plain record to the app's started producer directly (``app._plain_producer``,
which the App keeps current): a sensor or on_produce_message receiver added later, a new producer,
or a transaction must still send the record the general way (observed, into the new producer, into
the transaction). These tests run on the real KafkaProducer, with aiokafka's client replaced by
one that keeps the batches it is handed (aiokafka's own BatchBuilder), and read what was sent back
out of them."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiokafka.producer.message_accumulator import BatchBuilder
from aiokafka.record.memory_records import MemoryRecords

import agentstream
from agentstream.transport.kafka import KafkaProducer

pytestmark = pytest.mark.asyncio


class Client:
    """aiokafka's producer as far as KafkaProducer uses it: batches are kept, never sent."""

    def __init__(self) -> None:
        self.batches: list[tuple[str, BatchBuilder]] = []

    def create_batch(self) -> BatchBuilder:
        return BatchBuilder(16384, 0)

    async def partitions_for(self, topic: str) -> set[int]:
        return {0}

    async def send_batch(self, builder: BatchBuilder, topic: str, *, partition: int) -> asyncio.Future[Any]:
        self.batches.append((topic, builder))
        return asyncio.get_running_loop().create_future()

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    def sent(self) -> list[tuple[str, bytes | None, bytes | None]]:
        out = []
        for topic, builder in self.batches:
            if not builder.record_count():
                continue
            records = MemoryRecords(bytes(builder._build()))
            while records.has_next():
                out += [(topic, r.key, r.value) for r in records.next_batch()]
        return out


async def kafka_producer() -> tuple[KafkaProducer, Client]:
    client = Client()
    producer = KafkaProducer(["fake:9092"], {}, client_factory=lambda **_: client)
    await producer.start()
    return producer, client


async def started_app() -> tuple[Any, Client]:
    app = agentstream.App("plain-sends", broker="memory://")
    producer, client = await kafka_producer()
    app._producer = producer
    app._producer_started = True
    return app, client


async def test_a_receiver_connected_after_the_first_sends_sees_later_sends() -> None:
    app, client = await started_app()
    topic = app.topic("t", key_type=str, value_type=str)
    await topic.send(key="a", value="1")  # learns the topic (send())
    await topic.send(key="b", value="2")  # a plain send: the producer's synchronous append
    seen: list[Any] = []
    app.on_produce_message.connect(lambda sender, **kw: seen.append(kw["key"]))
    await topic.send(key="c", value="3")
    assert seen == [b"c"]  # the plain send did not skip the receiver
    assert client.sent() == [("t", b"a", b'"1"'), ("t", b"b", b'"2"'), ("t", b"c", b'"3"')]


async def test_a_sensor_added_after_the_first_sends_sees_later_sends() -> None:
    app, client = await started_app()
    topic = app.topic("t", key_type=str, value_type=str)
    await topic.send(key="a", value="1")
    await topic.send(key="b", value="2")
    seen: list[Any] = []

    class Sensor(agentstream.Sensor):
        def on_send_initiated(self, producer: Any, topic: str, message: Any, keysize: int, valsize: int) -> Any:
            seen.append((topic, keysize, valsize))

    app.sensors.add(Sensor())
    await topic.send(key="c", value="33")
    assert seen == [("t", 1, 4)]
    assert [k for _, k, _ in client.sent()] == [b"a", b"b", b"c"]


async def test_a_new_producer_gets_the_records_sent_after_it_replaced_the_old_one() -> None:
    app, first = await started_app()
    topic = app.topic("t", key_type=str, value_type=str)
    await topic.send(key="a", value="1")
    await topic.send(key="b", value="2")
    first_producer = app._producer
    await first_producer.stop()  # App.stop_clients() stops it (after a flush this fake cannot answer)
    app._producer = None
    second_producer, second = await kafka_producer()
    app._producer = second_producer  # what start_producer() leaves
    await topic.send(key="c", value="3")
    await topic.send(key="d", value="4")
    assert first.sent() == [("t", b"a", b'"1"'), ("t", b"b", b'"2"')]
    assert second.sent() == [("t", b"c", b'"3"'), ("t", b"d", b'"4"')]


async def test_under_exactly_once_a_task_send_goes_into_its_transaction_every_time() -> None:
    """No plain sends under exactly_once: the first and every later send of a task with a transaction
    reach the transaction, never the producer's append."""
    from agentstream.runtime import current_task

    app, client = await started_app()
    app.conf.processing_guarantee = "exactly_once"
    topic = app.topic("t", key_type=str, value_type=str)
    into_txn: list[Any] = []

    class Txn:
        async def send(self, topic: str, key: Any, value: Any, **options: Any) -> Any:
            into_txn.append((topic, key, value))
            return object()

    class Task:
        txn = Txn()

    token = current_task.set(Task())  # type: ignore[arg-type]
    try:
        for i in range(3):
            await topic.send(key="k", value=str(i))
    finally:
        current_task.reset(token)
    assert client.sent() == [] and len(into_txn) == 3


async def test_a_codec_giving_a_bytearray_is_sent_as_bytes() -> None:
    """A codec's dumps may give a bytearray: the compiled build checks types, so the send
    normalises it instead of failing."""

    class Codec:
        def dumps(self, obj: Any) -> Any:
            return bytearray(str(obj).encode())

        def loads(self, data: Any) -> Any:
            return bytes(data).decode()

    app, client = await started_app()
    topic = app.topic("t", key_serializer=Codec(), value_serializer=Codec())
    await topic.send(key="a", value="1")
    await topic.send(key="b", value="2")
    assert client.sent() == [("t", b"a", b"1"), ("t", b"b", b"2")]
