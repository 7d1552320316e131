"""``broker_client_id`` on the wire: the header of every request the producer and the consumer
send names it (Kafka's request header: api key, version, correlation id, client id). A loopback
stand-in for the broker reads the first request of each connection and hangs up."""

from __future__ import annotations

import asyncio
import struct

import pytest

from agentstream import App
from agentstream.exceptions import TransportError

pytestmark = pytest.mark.asyncio


async def client_ids_sent(app_options: dict[str, object], client: str) -> list[str]:
    seen: list[str] = []

    async def first_request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            size = int.from_bytes(await reader.readexactly(4), "big")
            header = await reader.readexactly(size)
            (length,) = struct.unpack_from(">h", header, 8)  # after api key, api version, correlation id
            seen.append(header[10 : 10 + length].decode())
        except asyncio.IncompleteReadError:
            pass
        writer.close()

    server = await asyncio.start_server(first_request, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    app = App("wire", broker=f"kafka://127.0.0.1:{port}", **app_options)  # type: ignore[arg-type]
    try:
        if client == "producer":
            producer = app.transport.producer(**app.producer_settings())
            with pytest.raises(TransportError):
                await producer.start()
        else:
            consumer = app.transport.consumer(group_id=app.id, **app.consumer_settings(group=True))
            consumer.subscribe(["t"], listener=None)  # type: ignore[arg-type]
            with pytest.raises(TransportError):
                await consumer.start()
    finally:
        server.close()
        await server.wait_closed()
        await app.stop_clients()
    return seen


@pytest.mark.parametrize("client", ["producer", "consumer"])
async def test_the_client_id_is_in_the_request_header(client: str) -> None:
    seen = await client_ids_sent({"broker_client_id": "billing-7"}, client)
    assert seen and set(seen) == {"billing-7"}


async def test_the_default_client_id_names_agentstream() -> None:
    seen = await client_ids_sent({}, "producer")
    assert seen and all(s.startswith("agentstream-") for s in seen)
