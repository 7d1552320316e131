"""``producer_max_request_size``: agentstream fills aiokafka's batches itself, so the record size
check aiokafka's ``send()`` makes is agentstream's: a record larger than the limit fails its send,
naming the setting; smaller ones go out (stand-in for aiokafka's producer, no broker)."""

from __future__ import annotations

import pytest

from agentstream import App
from agentstream.exceptions import ProducerError
from agentstream.transport.kafka import KafkaProducer
from tests.unit.transport.test_kafka_producer import FakeAioProducer

pytestmark = pytest.mark.asyncio


async def test_a_record_larger_than_the_max_request_size_fails_its_send() -> None:
    app = App("big", broker="kafka://127.0.0.1:1", producer_max_request_size=20_000, producer_max_batch_size=16_384)
    fake = FakeAioProducer()
    producer = KafkaProducer(["127.0.0.1:1"], app.producer_settings(), client_factory=lambda **config: fake)
    await producer.start()
    with pytest.raises(ProducerError, match=r"t: the record is \d+ bytes, more than producer_max_request_size=20000"):
        await producer.send("t", b"k", b"x" * 20_000, partition=0)
    await producer.send("t", None, b"x" * 19_000, partition=0)  # alone in its batch, under the limit
    await producer.flush()
    assert [len(v or b"") for v in fake.delivered_values()] == [19_000]


async def test_a_topic_the_app_may_not_write_is_a_rejected_record_and_a_larger_one_too() -> None:
    """Both are refused for good at the send (RecordRejected): the production_exception_handler's to answer."""
    from aiokafka.errors import TopicAuthorizationFailedError

    from agentstream.exceptions import RecordRejected

    class Unauthorised(FakeAioProducer):
        async def partitions_for(self, topic: str) -> set[int]:
            if topic == "secret":
                raise TopicAuthorizationFailedError(topic)
            return await super().partitions_for(topic)

    app = App("auth", broker="kafka://127.0.0.1:1", producer_max_request_size=20_000, producer_max_batch_size=16_384)
    producer = KafkaProducer(["127.0.0.1:1"], app.producer_settings(), client_factory=lambda **config: Unauthorised())
    await producer.start()
    with pytest.raises(RecordRejected, match="secret.*not authorised"):
        await producer.send("secret", b"k", b"v")
    with pytest.raises(RecordRejected, match="producer_max_request_size"):
        await producer.send("t", b"k", b"x" * 20_000, partition=0)
