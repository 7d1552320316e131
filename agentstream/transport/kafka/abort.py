"""Closing an aiokafka producer so that nothing it still holds can reach a broker later.

``AIOKafkaProducer.stop()`` flushes, and aiokafka's sender retries a produce request that failed
on a broken connection (the batch goes back to its queue until it expires), so a producer cut off
from the broker delivers its writes whenever the link comes back. For a member the group has
fenced meanwhile, those are a zombie's writes landing after the new owner's. Here the producer is
closed the other way round:

1. its sender task is cancelled, so no request is sent or retried from now on;
2. every batch it holds (queued, or in a request awaiting its answer) fails with ``error``;
3. every connection is reset (``SO_LINGER`` 0, then abort): the kernel drops whatever it has not
   yet sent instead of retransmitting it once the network heals;
4. then it is stopped, which has nothing left to flush.

This reaches into aiokafka's producer (``_sender``, ``_message_accumulator``, ``client._conns``):
checked against aiokafka 0.14; a missing attribute only skips its step (step 4 still runs).
"""

from __future__ import annotations

import socket
import struct
from typing import Any

__all__ = ["abort_producer", "reset_connections"]

_LINGER_RESET = struct.pack("ii", 1, 0)  # l_onoff=1, l_linger=0: close() sends RST, drops the send buffer


def reset_connections(client: Any) -> int:
    """Reset every connection of an aiokafka client; returns how many were open."""
    reset = 0
    for conn in list(getattr(client, "_conns", {}).values()):
        writer = getattr(conn, "_writer", None)
        transport = getattr(writer, "transport", None)
        if transport is None:
            continue
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
            except OSError:
                pass  # already closed
        transport.abort()
        reset += 1
    return reset


async def abort_producer(producer: Any, error: BaseException) -> int:
    """Close an AIOKafkaProducer without delivering anything more (see the module docstring).

    Returns the number of connections reset."""
    sender = getattr(producer, "_sender", None)
    task = getattr(sender, "sender_task", None)
    if task is not None and not task.done():
        task.cancel()
    accumulator = getattr(producer, "_message_accumulator", None)
    if accumulator is not None:
        accumulator.fail_all(error)
    client = getattr(producer, "client", None)
    reset = reset_connections(client) if client is not None else 0
    try:
        await producer.stop()
    except Exception:  # closing a producer we are discarding: its errors change nothing
        pass
    return reset
