"""The hand-written aiokafka loop every raw baseline shares, in its two producer modes.

A baseline module (:mod:`bench.raw_passthrough`, :mod:`bench.raw_wordcount`) only says what it
does with one fetched batch; this module runs it the way a careful user would by hand:

    getmany(max_records=1000) -> the workload's handler per fetched batch -> every second
    (agentstream's default commit_interval) and at the end: flush the producer, commit offsets.

Producer modes (``--batch``):

* default, *raw*: ``await producer.send()`` per record, aiokafka used the plain documented way;
* ``--batch``, *batch-API*: :class:`BatchSender`, the best producer we know how to write by hand:
  one ``BatchBuilder`` per partition (``producer.create_batch()`` / ``append``), full batches
  handed over with ``producer.send_batch()``, the partition chosen once per distinct key (murmur2,
  as aiokafka's default partitioner), no timestamps; a batch is handed to the producer when full or, after
  a poll, once it is 5 ms old (the linger every side has: the poll never waits past it), and all
  are flushed at each commit. This is issue 17's target baseline.

Timed like the agentstream side: from the first fetched record until the final flush + commit
returned. Prints ``started``/``assigned``/``revoked``/``progress`` event lines like
:mod:`bench.as_runner`, so the latency, backlog and scale cases drive it the same way; with
``--until-signal`` it runs until SIGUSR1 (the scale case sums several processes' progress).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import uvloop
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.partitioner import murmur2

from bench.common import COMMIT_INTERVAL, MAX_POLL_RECORDS, Meter, announce, consumer_group_kwargs, report

Send = Callable[[str, bytes, bytes], Awaitable[Any]]  # (topic, key, value)
LINGER_S = 0.005  # every side's producer linger (aiokafka linger_ms=5, agentstream producer_linger)
POLL_MS = 200


class Workload(Protocol):
    """One baseline's work: its topics, its per-batch handler and when it is done."""

    inputs: list[str]
    outputs: list[str]
    distinct_keys: bool  # every key new (pass-through): the batch sender skips its key -> partition memo
    handled: int  # records handled so far (progress events)
    work: int  # the work done so far in a unit that costs the same wherever it is done (the steady rate)

    async def handle(self, tp: TopicPartition, messages: list[Any], send: Send) -> None: ...

    def finished(self) -> bool: ...

    def result(self, meter: Meter) -> dict[str, Any]: ...


class BatchSender:
    """Appends records to per-(topic, partition) batches; ``flush()`` sends the open ones and waits."""

    def __init__(
        self, producer: AIOKafkaProducer, partitions: dict[str, int], *, memo: bool = True, linger: float = LINGER_S
    ) -> None:
        self.producer = producer
        self.linger = linger
        self._opened: dict[tuple[str, int], float] = {}  # when each open batch got its first record
        self.memo = memo  # off where every key is new (pass-through): a memo would only cost
        self.partitions = partitions
        self._open: dict[tuple[str, int], Any] = {}
        self._futures: list[asyncio.Future[Any]] = []
        self._partition_of: dict[tuple[str, bytes], int] = {}

    def partition(self, topic: str, key: bytes) -> int:
        if not self.memo:
            return (murmur2(key) & 0x7FFFFFFF) % self.partitions[topic]
        memo = self._partition_of
        p = memo.get((topic, key))
        if p is None:
            p = (murmur2(key) & 0x7FFFFFFF) % self.partitions[topic]
            memo[(topic, key)] = p
        return p

    async def send(self, topic: str, key: bytes, value: bytes) -> None:
        where = (topic, self.partition(topic, key))
        batch = self._open.get(where)
        if batch is None:
            batch = self._open[where] = self.producer.create_batch()
            self._opened[where] = time.monotonic()
        if batch.append(key=key, value=value, timestamp=None) is None:
            await self._ship(where, batch)
            batch = self._open[where] = self.producer.create_batch()
            self._opened[where] = time.monotonic()
            batch.append(key=key, value=value, timestamp=None)

    async def _ship(self, where: tuple[str, int], batch: Any) -> None:
        self._futures.append(await self.producer.send_batch(batch, where[0], partition=where[1]))

    def due_in(self) -> float | None:
        """Seconds until the oldest open batch has lingered ``linger`` (None: nothing open)."""
        if not self._opened:
            return None
        return min(self._opened.values()) + self.linger - time.monotonic()

    async def ship(self, all_open: bool = False) -> None:
        """Hand the open batches that lingered ``linger`` (or all of them) to the producer, not
        waiting for them: what aiokafka's ``linger_ms`` does for ``send()``."""
        now = time.monotonic()
        for where, opened in list(self._opened.items()):
            if all_open or now - opened >= self.linger:
                del self._opened[where]
                batch = self._open.pop(where)
                if batch.record_count():
                    await self._ship(where, batch)

    async def flush(self) -> None:
        """Send every open batch and wait until the broker acknowledged all of them."""
        await self.ship(all_open=True)
        futures, self._futures = self._futures, []
        if futures:
            await asyncio.gather(*futures)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--group", required=True)
    p.add_argument(
        "--batch", action="store_true", help="produce through the batch API (BatchSender) instead of send() per record"
    )
    p.add_argument(
        "--progress",
        type=float,
        default=0.0,
        help="print a progress event (records handled so far) at most every that many seconds",
    )
    p.add_argument(
        "--until-signal",
        action="store_true",
        help="run until SIGUSR1 (the orchestrator sums several processes' progress), not until done",
    )


async def run(args: argparse.Namespace, work: Workload) -> dict[str, Any]:
    bootstrap = os.environ["BENCH_BOOTSTRAP"]
    consumer = AIOKafkaConsumer(
        *work.inputs,
        bootstrap_servers=bootstrap,
        group_id=args.group,
        max_poll_records=MAX_POLL_RECORDS,
        **consumer_group_kwargs(),
    )
    # send() per record: aiokafka's linger (5 ms). The batch mode lingers in BatchSender itself and
    # hands over batches that are done, so aiokafka must not linger them again (linger_ms=0).
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0 if args.batch else 5)
    await producer.start()
    await consumer.start()
    send: Send
    flush: Callable[[], Awaitable[Any]]
    sender: BatchSender | None = None
    if args.batch:
        sender = BatchSender(
            producer, {t: len(await producer.partitions_for(t)) for t in work.outputs}, memo=not work.distinct_keys
        )
        send, flush = sender.send, sender.flush
    else:
        psend = producer.send
        send, flush = (lambda topic, key, value: psend(topic, value, key=key)), producer.flush
    stop = asyncio.Event()
    if args.until_signal:
        asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, stop.set)
    announce("started")
    meter = Meter()
    last_commit = time.monotonic()
    announced: tuple[int, ...] | None = None
    next_progress = 0.0
    handle = work.handle
    try:
        while not (stop.is_set() if args.until_signal else work.finished()):
            timeout_ms = POLL_MS
            if sender is not None and (due := sender.due_in()) is not None:  # never sit on an open batch
                timeout_ms = max(0, min(POLL_MS, int(due * 1000)))
            batches = await consumer.getmany(timeout_ms=timeout_ms, max_records=MAX_POLL_RECORDS)
            if batches:
                meter.start()
            for tp, messages in batches.items():
                await handle(tp, messages, send)
            meter.mark(work.work)
            if sender is not None:
                await sender.ship()
            parts = tuple(sorted({tp.partition for tp in consumer.assignment()})) or None
            if parts != announced:  # joined (ready for a paced feed) or rebalanced
                announced = parts
                announce("revoked") if parts is None else announce("assigned", partitions=list(parts))
            if args.progress and time.monotonic() >= next_progress:
                announce("progress", processed=work.handled)
                next_progress = time.monotonic() + args.progress
            if time.monotonic() - last_commit >= COMMIT_INTERVAL:
                await flush()
                await consumer.commit()
                last_commit = time.monotonic()
        await flush()
        await consumer.commit()
        meter.start()  # no-op unless nothing was ever fetched (--until-signal)
        return work.result(meter)
    finally:
        await consumer.stop()
        await producer.stop()


def main(args: argparse.Namespace, work: Workload) -> int:
    report(uvloop.run(run(args, work)))
    return 0
