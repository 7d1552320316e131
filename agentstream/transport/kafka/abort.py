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
4. the sender task is awaited to its end: a cancelled sender first waits for its requests in
   flight, which the reset fails at once. aiokafka's ``stop()`` would otherwise cancel it a second
   time and await it, raising that CancelledError into the caller (seen on Kafka when a broker
   died: the fence ended there, before it asked the group to rejoin, and the worker idled);
5. then it is stopped, which has nothing left to flush; bounded all the same (:data:`STOP_S`): the
   fence must go on to ask the group to rejoin whatever aiokafka's ``stop()`` waits for.

This reaches into aiokafka's producer (``_sender``, ``_message_accumulator``, ``client._conns``):
checked against aiokafka 0.14; a missing attribute only skips its step (step 4 still runs).
"""

from __future__ import annotations

import asyncio
import socket
import struct
from typing import Any

__all__ = ["abort_producer", "reset_connections"]

_LINGER_RESET = struct.pack("ii", 1, 0)  # l_onoff=1, l_linger=0: close() sends RST, drops the send buffer
SENDER_END_S = 5.0  # how long the cancelled sender may take over its failed requests before stop() goes on
STOP_S = 5.0  # how long the discarded producer's stop() may take before the fence goes on without it


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
    if isinstance(task, asyncio.Future) and not task.done():
        await asyncio.wait({task}, timeout=SENDER_END_S)  # raises only if we are cancelled ourselves
    try:
        await asyncio.wait_for(producer.stop(), STOP_S)
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise  # our own cancellation
        # the sender's, re-raised by aiokafka's stop(): the producer is closed all the same
    except Exception:  # closing a producer we are discarding: its errors (or its hanging) change nothing
        pass
    return reset
