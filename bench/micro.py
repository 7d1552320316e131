"""Per-record costs of the word count's three framework calls, in one process, no broker: what
each costs against the least a hand-written loop does for the same step (the batch-API loop of
:mod:`bench.raw_wordcount`). These explain the word count's CPU ratio; they are not targets.

* ``stream``: ``async for value in stream`` over a task's buffered records (take, ack, decode a
  JSON int, the Event) against a bare async iterator that pops and decodes;
* ``send``: ``await topic.send(key=str, value=int)`` into the kafka:// producer's open batches
  (aiokafka's C builders, no broker behind them) against the batch loop's encode + partition
  memo + ``BatchBuilder.append``;
* ``table``: ``t[w] = t[w] + 1`` on a table partition (memory store, write-back cache) with a
  record in hand against ``counts[key] = counts.get(key, 0) + 1`` on a dict;
* ``fetch``: reading a fetched 20,000-record batch, our consumers' reader (compiled Messages,
  :mod:`agentstream.transport.kafka.fetch`) against aiokafka's own (``PartitionRecords``, a
  ``ConsumerRecord`` per record: what the batch loop's ``getmany`` pays).

    python -m bench.micro [--n 300000] [--cpu]

Best of 5 runs per line, in microseconds per record; wall-clock, so run it on a quiet machine, or
with ``--cpu``: the main thread's CPU time (everything here runs on that one thread), which other
processes on a shared machine disturb far less than the wall clock.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any

import orjson
import uvloop
from aiokafka.partitioner import murmur2 as aiokafka_murmur2  # type: ignore[import-untyped,unused-ignore]
from aiokafka.producer.message_accumulator import BatchBuilder  # type: ignore[import-untyped,unused-ignore]

import agentstream
from agentstream.events import Event, set_current_event
from agentstream.lifecycle import PartitionState
from agentstream.runtime import current_runtime, runtime_for
from agentstream.tables.partition import TablePartition
from agentstream.tables.store import MemoryStore
from agentstream.transport.base import TP
from agentstream.transport.kafka.batches import OpenBatch
from agentstream.transport.kafka.producer import KafkaProducer
from agentstream.transport.message import Message
from agentstream.transport.partitioner import default_partition
from agentstream.worker.errors import ErrorPolicy
from agentstream.worker.task import StreamTask, TaskId

PARTITIONS = 4
_clock: Callable[[], float] = time.perf_counter  # --cpu: time.thread_time


def record(topic: str, partition: int, offset: int, key: bytes | None, value: bytes) -> Any:
    return Message(topic, partition, offset, offset, 0, key, value, None, 0, len(value), ())


def best(run: Callable[[], float], times: int = 5) -> float:
    return min(run() for _ in range(times))


# -- stream ------------------------------------------------------------------------------------------
async def _stream(n: int) -> float:
    app = agentstream.App("micro-stream", broker="memory://micro", store="memory://", web_enabled=False)
    source = app.topic("in", value_type=int)
    done = asyncio.Event()
    count = 0

    async def agent(stream: agentstream.Stream) -> None:
        nonlocal count
        async for _value in stream:
            count += 1
            if count == n:
                done.set()

    app.agent(source)(agent)
    await app.discover()
    st = app.topology().subtopologies[0]
    tp = TP("in", 0)
    task = StreamTask(
        TaskId(st.id, 0),
        st,
        [tp],
        errors=ErrorPolicy(app, lambda exc: None),
        max_task_idle=0.0,
        buffer_max_records=n + 1,
        lagging=lambda q: False,
        on_drained=lambda tp: None,
    )
    task.add(tp, [record("in", 0, i, None, b"%d" % i) for i in range(n)])
    t0 = _clock()
    task.start()
    await done.wait()
    elapsed = _clock() - t0
    await task.stop(1.0)
    return elapsed


class _Bare:
    """The least an async iterator over buffered records does: pop one, decode its value."""

    def __init__(self, messages: deque[Any]) -> None:
        self.messages = messages

    def __aiter__(self) -> _Bare:
        return self

    async def __anext__(self) -> Any:
        return orjson.loads(self.messages.popleft().value)


async def _stream_floor(n: int) -> float:
    messages = deque(record("in", 0, i, None, b"%d" % i) for i in range(n))
    count = 0
    t0 = _clock()
    async for _value in _Bare(messages):
        count += 1
        if count == n:
            break
    return _clock() - t0


# -- send --------------------------------------------------------------------------------------------
def _builder() -> Any:
    return BatchBuilder(1 << 30, 0)


async def _send(words: list[str]) -> float:
    app = agentstream.App("micro-send", broker="kafka://127.0.0.1:1", web_enabled=False)
    out = app.topic("out", key_type=str, value_type=int)
    producer = KafkaProducer(["127.0.0.1:1"], {})
    loop = asyncio.get_running_loop()
    # The state a started producer has after its first send to the topic (no broker needed).
    producer._loop = loop
    producer._producer = object()
    memo = producer._partitioning.learn("out", PARTITIONS)
    batches = producer._batches.topic("out")
    for p in range(PARTITIONS):
        batches[p] = OpenBatch("out", p, _builder(), loop)
    producer._routes["out"] = (PARTITIONS, memo, batches)
    app._producer = producer  # type: ignore[assignment]
    app._producer_started = True
    send = out.send
    t0 = _clock()
    for i, word in enumerate(words):
        await send(key=word, value=i)
    return _clock() - t0


async def _send_floor(words: list[str]) -> float:
    batches: dict[int, Any] = {}
    memo: dict[bytes, int] = {}

    async def send(key: bytes, value: bytes) -> None:
        p = memo.get(key)
        if p is None:
            p = memo[key] = (aiokafka_murmur2(key) & 0x7FFFFFFF) % PARTITIONS
        batch = batches.get(p)
        if batch is None:
            batch = batches[p] = _builder()
        batch.append(key=key, value=value, timestamp=None)

    t0 = _clock()
    for i, word in enumerate(words):
        await send(word.encode(), orjson.dumps(i))
    return _clock() - t0


# -- table -------------------------------------------------------------------------------------------
def _events(words: list[str]) -> list[Event]:
    events = []
    for i, word in enumerate(words):
        kb = word.encode()
        p = default_partition(kb, PARTITIONS)
        events.append(Event(word, word, record("w", p, i, kb, kb), TP("w", p)))
    return events


def _table_case(words: list[str]) -> tuple[Callable[[], float], Callable[[], float]]:
    app = agentstream.App("micro-table", broker="memory://micro", store="memory://", web_enabled=False)
    table = app.Table("counts", default=int, partitions=PARTITIONS)
    rt = runtime_for(app)
    current_runtime.set(rt)
    parts = rt.table_partitions("counts")
    for p in range(PARTITIONS):
        part = parts[p] = TablePartition(table, p, MemoryStore(), None, 10_000)
        part.lifecycle.to(PartitionState.RESTORING)
        part.lifecycle.to(PartitionState.ACTIVE)
    events = _events(words)

    def ours() -> float:
        t0 = _clock()
        for event in events:
            set_current_event(event)
            word = event.value
            table[word] = table[word] + 1
        return _clock() - t0

    def floor() -> float:
        counts: dict[bytes | None, int] = {}
        t0 = _clock()
        for event in events:
            set_current_event(event)
            key = event.message.key
            counts[key] = counts.get(key, 0) + 1
        return _clock() - t0

    return ours, floor


# -- fetch -------------------------------------------------------------------------------------------
def _fetch_case(n: int) -> tuple[Callable[[], float], Callable[[], float]]:
    from aiokafka.record.default_records import (  # type: ignore[import-untyped,unused-ignore]
        DefaultRecordBatchBuilder,
    )
    from aiokafka.record.memory_records import MemoryRecords  # type: ignore[import-untyped,unused-ignore]

    from agentstream.transport.kafka import fetch

    per_batch = 20_000
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=0, producer_id=-1, producer_epoch=-1, base_sequence=-1,
        batch_size=1 << 30,
    )  # fmt: skip
    for i in range(per_batch):
        word = b"word%d" % (i % 1000)
        builder.append(i, timestamp=1_000 + i, key=word, value=word, headers=[])
    data = bytes(builder.build())
    tp = TP("w", 0)
    rounds = max(1, n // per_batch)

    def read(cls: Any, key_deserializer: Any) -> Callable[[], float]:
        def run() -> float:
            t0 = _clock()
            for _ in range(rounds):
                records = cls(tp, MemoryRecords(data), None, 0, key_deserializer, None, True, 0)
                for _message in records:
                    pass
            return (_clock() - t0) * n / (rounds * per_batch)

        return run

    return read(fetch.MessageRecords, fetch.raw_bytes), read(fetch._Original, None)


def _async(fn: Callable[[], Coroutine[Any, Any, float]]) -> Callable[[], float]:
    return lambda: uvloop.run(fn())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=300_000)
    p.add_argument("--cpu", action="store_true", help="time the main thread's CPU, not the wall clock")
    args = p.parse_args(argv)
    global _clock
    _clock = time.thread_time if args.cpu else time.perf_counter
    n = args.n
    words = [f"word{i % 1000}" for i in range(n)]
    table, table_floor = _table_case(words)
    fetched, fetched_floor = _fetch_case(n)
    cases = [
        ("stream", _async(lambda: _stream(n)), _async(lambda: _stream_floor(n))),
        ("send", _async(lambda: _send(words)), _async(lambda: _send_floor(words))),
        ("table", table, table_floor),
        ("fetch", fetched, fetched_floor),
    ]
    print(f"{'step':8} {'agentstream us':>15} {'hand-written us':>16} {'extra us':>9}")
    for name, ours, floor in cases:
        a, f = best(ours) / n * 1e6, best(floor) / n * 1e6
        print(f"{name:8} {a:15.3f} {f:16.3f} {a - f:9.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
