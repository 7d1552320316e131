"""A producer fenced while a produce request is in flight (a broker that stopped answering, or one that died)
still closes and returns: aiokafka's cancelled sender first waits for its requests in flight, and its ``stop()``
would cancel it a second time and raise that CancelledError into the fence, which then never asked the group to
rejoin (seen on Kafka: a worker idled for good after a broker died). The dev broker's traffic goes through a
fault proxy that holds it, so the request stays in flight."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentstream.exceptions import MembershipLapsed
from agentstream.transport.kafka import KafkaProducer
from tests.support.fault_proxy import proxied_dev_broker

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"


async def test_a_fence_with_a_request_in_flight_returns_and_the_producer_sends_again(
    request: pytest.FixtureRequest,
) -> None:
    logs = ARTIFACTS / request.node.name
    logs.mkdir(parents=True, exist_ok=True)
    with proxied_dev_broker(logs / "broker.log") as (broker, proxy):
        producer = KafkaProducer([broker.bootstrap], {"linger_ms": 0})
        await producer.start()
        try:
            await (await producer.send("fence-in-flight", b"k", b"before", partition=0))
            proxy.pause()  # the broker answers nothing: the next produce request stays in flight
            delivery = await producer.send("fence-in-flight", b"k", b"held", partition=0)
            await asyncio.sleep(0.5)
            error = MembershipLapsed("no heartbeat answered for the session timeout")
            await asyncio.wait_for(producer.fence(error), 30)  # returns (it raised CancelledError before)
            with pytest.raises(MembershipLapsed):
                await delivery
            proxy.resume()
            await producer.unfence()
            await (await producer.send("fence-in-flight", b"k", b"after", partition=0))
        finally:
            proxy.resume()
            await producer.stop()
