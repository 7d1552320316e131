"""The memory producer takes the same keywords as the Kafka producer: a misspelt one is a TypeError."""

from __future__ import annotations

import uuid

import pytest

from agentstream.transport.base import TopicSpec
from agentstream.transport.memory import MemoryTransport

pytestmark = pytest.mark.asyncio


async def test_a_misspelt_send_option_is_a_type_error_naming_it() -> None:
    t = MemoryTransport(f"memory://opts-{uuid.uuid4().hex[:6]}")
    await t.ensure_topics([TopicSpec("orders", 2)])
    p = t.producer()
    await p.start()
    try:
        with pytest.raises(TypeError, match="partiton"):
            await p.send("orders", b"k", b"v", partiton=1)  # type: ignore[call-arg]
        fut = await p.send("orders", b"k", b"v", partition=1, timestamp_ms=5, headers=None)
        assert (await fut).partition == 1
    finally:
        await p.stop()
        await t.close()
