"""What a scenario needs from the framework under test that is not the app's own code: where sent
records are captured, and the set-up Faust's testing guide does before ``agent.test_context()``.

Faust has no in-memory transport: its producer is replaced by one that records each send (the
bytes Faust serialized) and completes it. agentstream's ``test_context`` sends to a ``memory://``
broker: every append to a memory broker is recorded. Either way a scenario reads back
``sent(topic)``: the ``(key, value)`` pairs, decoded from JSON when they are JSON, in send order.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import faust

IS_FAUST = faust.__name__ == "faust"
FRAMEWORK = "faust" if IS_FAUST else "agentstream"

_sent: list[tuple[str, bytes | None, bytes | None, dict[str, str]]] = []


def _decode(data: Any) -> Any:
    if data is None:
        return None
    if isinstance(data, str):
        data = data.encode()
    try:
        obj = json.loads(data)
    except ValueError:
        return data.decode(errors="replace")
    return _strip(obj)


def _strip(obj: Any) -> Any:
    """Records' ``__faust`` namespace marker is left out of the comparison."""
    if isinstance(obj, dict):
        return {k: _strip(v) for k, v in obj.items() if k != "__faust"}
    if isinstance(obj, list):
        return [_strip(v) for v in obj]
    return obj


def sent(topic: str) -> list[list[Any]]:
    """``[key, value]`` of each record sent to ``topic`` so far (in this process)."""
    return [[_decode(k), _decode(v)] for t, k, v, _ in _sent if t == topic]


def sent_headers(topic: str) -> list[dict[str, str]]:
    """The headers of each record sent to ``topic`` (values decoded as UTF-8)."""
    return [h for t, _, _, h in _sent if t == topic]


def sent_topics() -> list[str]:
    return sorted({t for t, _, _, _ in _sent})


def _headers(headers: Any) -> dict[str, str]:
    items = headers.items() if isinstance(headers, dict) else (headers or ())
    return {str(k): (v.decode(errors="replace") if isinstance(v, bytes) else str(v)) for k, v in items}


def reset() -> None:
    _sent.clear()


def setup(app: Any) -> None:
    """Faust: its testing guide's set-up (finalize, memory store, flow resumed) and the recording
    producer. agentstream: the app on a private memory broker (``test_context`` does the same), as
    Faust's stand-in producer keeps its sends off the network; sends are recorded below."""
    if not IS_FAUST:
        from agentstream.agents.test_context import use_memory

        use_memory(app, f"compat-{app.conf.id}")
        app.transport.broker.auto_create_partitions = 1  # Faust relies on the broker creating topics on use
        return
    if IS_FAUST:
        app.finalize()
        app.conf.store = "memory://"
        app.flow_control.resume()
        producer = _FaustRecordingProducer()

        async def maybe_start_producer() -> Any:
            return producer

        app.maybe_start_producer = maybe_start_producer
        app._producer = producer


class _FaustRecordingProducer:
    """Stands in for Faust's producer: records the serialized record, answers a RecordMetadata."""

    buffer = None

    def __init__(self) -> None:
        self.offsets: dict[tuple[str, int], int] = {}

    def _record(self, topic: str, key: Any, value: Any, partition: int | None, timestamp: Any, headers: Any) -> Any:
        from faust.types import TP
        from faust.types.tuples import RecordMetadata

        _sent.append((topic, key, value, _headers(headers)))
        p = partition or 0
        off = self.offsets.get((topic, p), 0)
        self.offsets[(topic, p)] = off + 1
        return RecordMetadata(topic=topic, partition=p, topic_partition=TP(topic, p), offset=off, timestamp=timestamp)

    async def send(
        self, topic: str, key: Any, value: Any, partition: Any, timestamp: Any, headers: Any, **kw: Any
    ) -> Any:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        fut.set_result(self._record(topic, key, value, partition, timestamp, headers))
        return fut

    async def send_and_wait(
        self, topic: str, key: Any, value: Any, partition: Any, timestamp: Any, headers: Any, **kw: Any
    ) -> Any:
        return self._record(topic, key, value, partition, timestamp, headers)

    def send_soon(self, fut: Any) -> None:
        asyncio.ensure_future(fut.message.channel.publish_message(fut, wait=False))

    async def maybe_start(self) -> None:
        return None

    async def flush(self) -> None:
        await asyncio.sleep(0)

    def key_partition(self, topic: str, key: bytes) -> Any:
        from faust.types import TP

        return TP(topic, 0)


if not IS_FAUST:
    from agentstream.transport.memory.broker import MemoryBroker

    _append = MemoryBroker.append

    def _recording_append(
        self: MemoryBroker, tp: Any, key: Any, value: Any, timestamp_ms: Any, headers: Any, *args: Any, **kw: Any
    ) -> Any:
        _sent.append((tp.topic, key, value, _headers(headers)))
        return _append(self, tp, key, value, timestamp_ms, headers, *args, **kw)

    MemoryBroker.append = _recording_append  # type: ignore[method-assign]


async def stop_clients(app: Any) -> None:
    """Stop the producer a send outside a worker started (Faust: the app's producer)."""
    if IS_FAUST:
        await app.producer.stop()
    else:
        await app.stop_clients()


async def read_broker_topic(topic: str, expect: int = 1, headers: bool = False) -> list[list[Any]]:
    """``[key, value]`` of the first ``expect`` records of ``topic`` on the real broker (and their
    headers, decoded as UTF-8, with ``headers=True``)."""
    from aiokafka import AIOKafkaConsumer

    bootstrap = os.environ["COMPAT_BROKER"].split("://", 1)[-1]
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    got: list[list[Any]] = []
    try:
        for _ in range(20):
            batches = await consumer.getmany(timeout_ms=250)
            got += [
                [_decode(r.key), _decode(r.value), *([_headers(r.headers)] if headers else [])]
                for recs in batches.values()
                for r in recs
            ]
            if len(got) >= expect:
                break
    finally:
        await consumer.stop()
    return got
