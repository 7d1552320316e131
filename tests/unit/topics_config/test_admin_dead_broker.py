"""The kafka:// topic admin when the broker aiokafka picked is dead: aiokafka sends an admin request to a random
broker of its metadata (or to the controller it last heard of) and does not try another, and a killed broker
stays in a cluster's metadata until the controller fences it (9 s by default). A worker starting then must not
fail: the admin tries again, with fresh metadata, until its request timeout (shown end to end on a Kafka cluster
by tests/integration/test_kafka_broker_death.py)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiokafka import errors as kafka_errors

from agentstream.exceptions import TransportError
from agentstream.transport.base import TopicSpec
from agentstream.transport.kafka import admin as admin_module

from .test_create_requests import RecordingAdmin, admin_with


@dataclass
class Client:
    refreshed: int = 0

    async def force_metadata_update(self) -> bool:
        self.refreshed += 1
        return True


@dataclass
class DeadBrokerFirst(RecordingAdmin):
    """The first ``dead`` requests reach the dead broker: not ready (refused), or no answer at all (``hang``)."""

    dead: int = 2
    hang: bool = False
    error: type[Exception] = kafka_errors.NodeNotReadyError
    _client: Client = field(default_factory=Client)

    async def _dead_broker(self) -> None:
        if self.dead > 0:
            self.dead -= 1
            if self.hang:
                await asyncio.sleep(3600)
            raise self.error("Attempt to send a request to node which is not ready (node id 3).")

    async def describe_topics(self, names: Any) -> list[dict[str, Any]]:
        await self._dead_broker()
        return await super().describe_topics(names)

    async def create_topics(self, new_topics: list[Any]) -> Any:
        await self._dead_broker()
        return await super().create_topics(new_topics)


async def test_topics_are_described_and_created_past_a_dead_broker() -> None:
    fake = DeadBrokerFirst(dead=2)
    counts = await admin_with(fake).ensure_topics([TopicSpec("cl", 2, compacted=True)])
    assert counts == {"cl": 2}
    assert fake._client.refreshed >= 2  # each try after a failure asked for fresh metadata


async def test_a_controller_that_does_not_answer_is_left_after_one_attempt(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(admin_module, "ATTEMPT_S", 0.05)
    fake = DeadBrokerFirst(dead=1, hang=True)
    assert await admin_with(fake).ensure_topics([TopicSpec("t", 3)]) == {"t": 3}


async def test_a_broker_that_stays_dead_fails_at_the_request_timeout_naming_the_cause() -> None:
    fake = DeadBrokerFirst(dead=1000)
    with pytest.raises(TransportError, match="NodeNotReadyError"):
        await admin_with(fake).ensure_topics([TopicSpec("t", 1)])  # the request timeout: 1 s


async def test_an_error_that_retrying_cannot_fix_fails_at_once() -> None:
    fake = DeadBrokerFirst(dead=1, error=kafka_errors.TopicAuthorizationFailedError)
    with pytest.raises(TransportError, match="TopicAuthorizationFailedError"):
        await admin_with(fake).ensure_topics([TopicSpec("t", 1)])
    assert fake._client.refreshed == 0
