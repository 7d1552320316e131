"""A request on a broker connection the broker just reset (issue 39, a worker idle after its group
coordinator's broker died).

When a broker dies, the kernel resets its connections. On uvloop (the worker's loop) the transport
closes at once, but aiokafka's connection still counts as connected until its read task has seen
the error and closed it, a few callbacks later. A request sent in that window is written to a
closed transport, and uvloop raises ``RuntimeError: ... the handler is closed``, which aiokafka does
not catch (only ``OSError``). In aiokafka's background metadata task that ended every metadata
refresh of the consumer's client: its group coordinator, which waits for a refresh after a failed
coordinator lookup, waited forever, and the fenced worker neither rejoined nor logged again.

A one-node fake broker (ApiVersions and Metadata v0) lets a real aiokafka client connect; the broker
then resets the connection, and a request is started the moment the reset reaches the connection
(``connection_lost``): the window a broker's death opens, made deterministic.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiokafka.client import AIOKafkaClient, ConnectionGroup
from aiokafka.errors import KafkaConnectionError, KafkaError
from aiokafka.protocol.admin import ApiVersionResponse_v0
from aiokafka.protocol.metadata import MetadataRequest, MetadataResponse_v0

from agentstream.transport.kafka import KafkaConsumer, conn_guard

uvloop = pytest.importorskip("uvloop")

_API_VERSIONS, _METADATA = 18, 3


class FakeBroker:
    """Answers ApiVersions (offering Metadata v0 only) and Metadata (itself as node 0, no topics)."""

    def __init__(self) -> None:
        self.server: asyncio.AbstractServer | None = None
        self.port = 0
        self.writers: list[asyncio.StreamWriter] = []

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.append(writer)
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                body = await reader.readexactly(size)
                api_key, _version, correlation_id = struct.unpack(">hhi", body[:8])
                if api_key == _API_VERSIONS:
                    answer = ApiVersionResponse_v0(0, [(_API_VERSIONS, 0, 0), (_METADATA, 0, 0)]).encode()
                elif api_key == _METADATA:
                    answer = MetadataResponse_v0([(0, "127.0.0.1", self.port)], []).encode()
                else:
                    return
                frame = struct.pack(">i", correlation_id) + answer
                writer.write(struct.pack(">i", len(frame)) + frame)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass

    def reset(self) -> None:
        """Reset every connection (SO_LINGER 0), as the kernel does for a killed broker's sockets."""
        for writer in self.writers:
            sock = writer.transport.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
        self.writers.clear()

    def close(self) -> None:
        if self.server is not None:
            self.server.close()


def _on_uvloop(scenario: Callable[[], Awaitable[None]]) -> None:
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(scenario())


async def _request_as_the_reset_arrives(
    client: AIOKafkaClient, broker: FakeBroker, request: Callable[[], Awaitable[Any]]
) -> asyncio.Future[Any]:
    """Reset the broker's side and start ``request`` in the callback that tells the client's
    connection (its transport now closed; aiokafka closes the connection only a few callbacks later)."""
    conn = client._conns[(0, ConnectionGroup.DEFAULT)]
    protocol = conn._protocol
    told: asyncio.Future[asyncio.Future[Any]] = asyncio.get_running_loop().create_future()
    original = protocol.connection_lost

    def connection_lost(exc: BaseException | None) -> None:
        original(exc)
        if not told.done():
            told.set_result(asyncio.ensure_future(request()))

    protocol.connection_lost = connection_lost
    broker.reset()
    return await asyncio.wait_for(told, 5)


async def _connected_client(broker: FakeBroker) -> AIOKafkaClient:
    await broker.start()
    client = AIOKafkaClient(bootstrap_servers=f"127.0.0.1:{broker.port}")
    await client.bootstrap()
    assert await asyncio.wait_for(client.force_metadata_update(), 5) is True  # connects to node 0
    return client


def test_a_request_on_a_connection_the_broker_just_reset_fails_as_a_connection_error() -> None:
    conn_guard.install()

    async def scenario() -> None:
        broker = FakeBroker()
        client = await _connected_client(broker)
        try:
            sent = await _request_as_the_reset_arrives(client, broker, lambda: client.send(0, MetadataRequest([])))
            with pytest.raises(KafkaConnectionError):  # what aiokafka retries, not a RuntimeError
                await sent
            # the next request reconnects and is answered
            response: Any = await asyncio.wait_for(client.send(0, MetadataRequest([])), 5)
            assert [b[0] for b in response.brokers] == [0]
        finally:
            await client.close()
            broker.close()

    _on_uvloop(scenario)


def test_a_metadata_refresh_meeting_a_connection_the_broker_just_reset_goes_on() -> None:
    """aiokafka's metadata refresh (the code its background task runs) fails over as for any dead
    broker, so the background task would live on; the next refresh reconnects."""
    conn_guard.install()

    async def scenario() -> None:
        broker = FakeBroker()
        client = await _connected_client(broker)
        try:
            refresh = await _request_as_the_reset_arrives(client, broker, client.fetch_all_metadata)
            with pytest.raises(KafkaError):  # every known broker failed: the error its callers handle
                await refresh
            metadata = await asyncio.wait_for(client.fetch_all_metadata(), 5)
            assert [b.nodeId for b in metadata.brokers()] == [0]
            assert await asyncio.wait_for(client.force_metadata_update(), 5) is True  # the background task lives
        finally:
            await client.close()
            broker.close()

    _on_uvloop(scenario)


def test_a_consumer_whose_metadata_task_ended_starts_it_again_at_its_next_poll(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The net under any other cause: aiokafka's metadata task ending on an unexpected exception left
    every refresh waiting forever; our consumer's next poll logs it and starts the task again."""

    async def scenario() -> None:
        broker = FakeBroker()
        await broker.start()
        consumer = KafkaConsumer([f"127.0.0.1:{broker.port}"], None, None, {})
        consumer.assign([])
        await consumer.start()
        try:
            client = consumer._consumer._client
            original = client._metadata_update

            async def fails_once(*args: Any) -> bool:
                client._metadata_update = original
                raise RuntimeError("unexpected")

            client._metadata_update = fails_once
            refresh = client.force_metadata_update()
            await asyncio.wait({client._sync_task}, timeout=5)
            assert client._sync_task.done()  # the refresh now waits for a task that is gone
            with caplog.at_level(logging.ERROR, logger="agentstream.transport"):
                await consumer.getmany(timeout_ms=0)
            assert await asyncio.wait_for(refresh, 5) is True
            assert "aiokafka's metadata task ended on RuntimeError('unexpected')" in caplog.text
        finally:
            await consumer.stop()
            broker.close()

    _on_uvloop(scenario)
