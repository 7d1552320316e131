"""DevBroker against the real tansu binary: ``start()`` (sync, also inside a running loop) and
``astart()`` return once the broker answers a metadata request; ``stop()`` ends it."""

from __future__ import annotations

from aiokafka.admin import AIOKafkaAdminClient  # type: ignore[import-untyped,unused-ignore]

from agentstream.devbroker import DevBroker


async def topics_of(broker: DevBroker) -> list[str]:
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    await admin.start()
    try:
        return list(await admin.list_topics())
    finally:
        await admin.close()


async def test_start_in_a_running_loop_and_astart_both_return_a_broker_that_answers() -> None:
    sync = DevBroker().start()  # inside this test's loop: the wait runs on a loop of its own
    try:
        assert sync.running
        assert await topics_of(sync) == []
    finally:
        sync.stop()
    assert not sync.running
    async with DevBroker() as b:
        assert await topics_of(b) == []
    assert not b.running
