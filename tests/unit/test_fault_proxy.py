"""The fault proxy (tests/support/fault_proxy.py) against a loopback echo server: each fault works
and is reversible. Bounded: one server, a handful of connections, sub-second waits."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from tests.support.fault_proxy import FaultProxy


@pytest_asyncio.fixture
async def proxy() -> AsyncIterator[FaultProxy]:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(1024):
            writer.write(data)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    p = FaultProxy(0, server.sockets[0].getsockname()[1], max_connections=3, seed=1)
    await p.start()
    yield p
    await p.stop()
    server.close()
    await server.wait_closed()


async def roundtrip(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, data: bytes, timeout: float = 5.0
) -> bytes:
    writer.write(data)
    await writer.drain()
    return await asyncio.wait_for(reader.readexactly(len(data)), timeout)


async def closed(reader: asyncio.StreamReader) -> bool:
    """The proxy ended this connection (a reset or an end of stream, depending on timing)."""
    try:
        return await asyncio.wait_for(reader.read(10), 5) == b""
    except ConnectionResetError:
        return True


async def test_forwards_delays_holds_and_cuts(proxy: FaultProxy) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.listen_port)
    assert await roundtrip(reader, writer, b"plain") == b"plain"

    proxy.delay(downstream=0.3)
    began = time.monotonic()
    assert await roundtrip(reader, writer, b"slow") == b"slow"
    assert time.monotonic() - began >= 0.29
    proxy.delay()

    proxy.pause()
    writer.write(b"held")
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(reader.readexactly(4), 0.3)
    proxy.resume()
    assert await asyncio.wait_for(reader.readexactly(4), 5) == b"held"

    await proxy.cut()
    assert await closed(reader)  # the client sees its connection end
    writer.close()
    reader2, writer2 = await asyncio.open_connection("127.0.0.1", proxy.listen_port)  # still listening
    assert await roundtrip(reader2, writer2, b"again") == b"again"
    writer2.close()


async def test_connection_cap_and_bounds(proxy: FaultProxy) -> None:
    conns = [await asyncio.open_connection("127.0.0.1", proxy.listen_port) for _ in range(3)]
    for r, w in conns:
        assert await roundtrip(r, w, b"x") == b"x"
    r4, w4 = await asyncio.open_connection("127.0.0.1", proxy.listen_port)
    assert await closed(r4)  # refused: over max_connections
    assert proxy.refused == 1
    for _, w in conns + [(r4, w4)]:
        w.close()
    with pytest.raises(ValueError, match="loopback"):
        FaultProxy(0, 1, host="10.0.0.1")
    with pytest.raises(ValueError, match="delay"):
        proxy.delay(upstream=1e6)
