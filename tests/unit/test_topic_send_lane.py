"""Topic.send's fast path binds the producer's per-record append once per started producer: a
sensor or on_produce_message receiver added later, a new producer, or a transaction must still
send the record the general way (observed, into the new producer, into the transaction)."""

from __future__ import annotations

from typing import Any

import pytest

import agentstream

pytestmark = pytest.mark.asyncio


class Producer:
    """The kafka:// producer's surface Topic.send uses: the synchronous append and send()."""

    def __init__(self) -> None:
        self.fast: list[tuple[Any, ...]] = []
        self.slow: list[tuple[Any, ...]] = []

    def send_now(self, topic: str, key: Any, value: Any, partition: Any, ts: Any, headers: Any) -> Any:
        self.fast.append((topic, key, value))
        return object()

    async def send(self, topic: str, key: Any, value: Any, **options: Any) -> Any:
        self.slow.append((topic, key, value))
        return object()

    async def start(self) -> None:
        pass


def started_app() -> tuple[Any, Producer]:
    app = agentstream.App("lane", broker="memory://")
    producer = Producer()
    app._producer = producer
    app._producer_started = True
    return app, producer


async def test_a_receiver_connected_after_the_first_send_sees_later_sends() -> None:
    app, producer = started_app()
    topic = app.topic("t", key_type=str, value_type=str)
    await topic.send(key="a", value="1")
    assert producer.fast == [("t", b"a", b'"1"')]
    seen: list[Any] = []
    app.on_produce_message.connect(lambda sender, **kw: seen.append(kw["key"]))
    await topic.send(key="b", value="2")
    assert seen == [b"b"]  # the fast path did not skip the receiver


async def test_a_new_producer_gets_the_records_sent_after_it_replaced_the_old_one() -> None:
    app, first = started_app()
    topic = app.topic("t", key_type=str, value_type=str)
    await topic.send(key="a", value="1")
    second = Producer()
    app._producer = second  # stop + start: a new producer object
    await topic.send(key="b", value="2")
    assert first.fast == [("t", b"a", b'"1"')]
    assert second.fast == [("t", b"b", b'"2"')]


async def test_under_exactly_once_a_task_send_goes_into_its_transaction_every_time() -> None:
    """No lane under exactly_once: the first and every later send of a task with a transaction
    reach the transaction, never the producer's append."""
    from agentstream.runtime import current_task

    app, producer = started_app()
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
    assert producer.fast == [] and len(into_txn) == 3
