"""The fetcher on its own: routing fetched records to the tasks that read each partition, and
back-pressure (a full task buffer leaves its partition out of the poll until it drains).

A ``memory://`` consumer with manually assigned partitions stands in for the group consumer; the
tasks are small fakes holding one RecordQueue per partition (what the fetcher needs of a task),
except in the last test, which runs real StreamTasks.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

import agentstream
from agentstream.transport.base import TP, Message, TopicSpec
from agentstream.transport.memory import MemoryConsumer, MemoryTransport
from agentstream.worker.errors import ErrorPolicy
from agentstream.worker.fetcher import Fetcher
from agentstream.worker.partition_group import RecordQueue
from agentstream.worker.task import StreamTask, TaskId
from tests.support.waiting import until

URL = "memory://fetcher-unit"
T0, T1 = TP("t", 0), TP("t", 1)


class FakeTask:
    """Buffers what the fetcher adds; the test drains it by hand."""

    def __init__(self, *tps: TP) -> None:
        self.queues = {tp: RecordQueue(tp) for tp in tps}
        self.received: dict[TP, list[int]] = {tp: [] for tp in tps}

    def add(self, tp: TP, messages: list[Message]) -> int:
        self.received[tp].extend(m.offset for m in messages)
        return self.queues[tp].add(messages)

    def queue(self, tp: TP) -> RecordQueue:
        return self.queues[tp]

    def take(self, tp: TP, n: int) -> None:
        for _ in range(n):
            self.queues[tp].messages.popleft()


class CountingConsumer:
    """The memory consumer, counting polls."""

    def __init__(self, inner: MemoryConsumer) -> None:
        self.inner = inner
        self.polls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def getmany(self, *tps: TP, timeout_ms: int = 0, max_records: int | None = None) -> Any:
        self.polls += 1
        return await self.inner.getmany(*tps, timeout_ms=timeout_ms, max_records=max_records)


async def polls_after(consumer: CountingConsumer, n: int) -> None:
    """Wait until the fetcher polled ``n`` more times."""
    target = consumer.polls + n
    await until(lambda: consumer.polls >= target, f"{n} more polls")


@pytest.fixture
async def transport() -> MemoryTransport:
    MemoryTransport.reset_all()
    t = MemoryTransport(URL)
    await t.ensure_topics([TopicSpec("t", 2)])
    return t


async def produce(transport: MemoryTransport, tp: TP, n: int) -> None:
    producer = transport.producer()
    await producer.start()
    for i in range(n):
        await producer.send(tp.topic, None, b"%d" % i, partition=tp.partition)


@pytest.fixture
async def consumer(transport: MemoryTransport) -> AsyncIterator[CountingConsumer]:
    inner = transport.consumer(group_id=None)
    inner.assign([T0, T1])
    await inner.start()
    yield CountingConsumer(inner)
    await inner.stop()


class Running:
    """A fetcher's run() as a background task, stopped through Fetcher.stop()."""

    def __init__(self, consumer: CountingConsumer, **kwargs: int) -> None:
        self.fetcher: Fetcher[Any] = Fetcher(consumer, **kwargs)  # type: ignore[arg-type]
        self.task: asyncio.Task[None] | None = None

    def start(self) -> Fetcher[Any]:
        self.task = asyncio.ensure_future(self.fetcher.run())
        return self.fetcher

    async def stop(self) -> None:
        if self.task is not None:
            await self.fetcher.stop(self.task)
            assert self.task.done()


@pytest.fixture
async def running(consumer: CountingConsumer) -> AsyncIterator[Callable[..., Running]]:
    made: list[Running] = []

    def make(**kwargs: int) -> Running:
        kwargs.setdefault("buffer_max_records", 100)
        kwargs.setdefault("max_poll_records", 100)
        r = Running(consumer, **kwargs)
        made.append(r)
        return r

    yield make
    for r in made:
        await r.stop()


# -- routing ----------------------------------------------------------------------------------------


async def test_records_go_to_the_task_that_owns_their_partition(
    transport: MemoryTransport, running: Callable[..., Running]
) -> None:
    await produce(transport, T0, 5)
    await produce(transport, T1, 3)
    task0, task1 = FakeTask(T0), FakeTask(T1)
    fetcher = running().start()
    fetcher.set_routes({T0: [task0], T1: [task1]})
    await until(lambda: len(task0.received[T0]) == 5 and len(task1.received[T1]) == 3, "all records routed")
    assert task0.received[T0] == [0, 1, 2, 3, 4]
    assert task1.received[T1] == [0, 1, 2]
    assert [m.partition for m in task0.queue(T0).messages] == [0] * 5
    assert fetcher.fetched == 8


async def test_a_partition_read_by_two_tasks_goes_to_both(
    transport: MemoryTransport, running: Callable[..., Running]
) -> None:
    await produce(transport, T0, 4)
    first, second = FakeTask(T0), FakeTask(T0)  # two sub-topologies read topic t
    fetcher = running().start()
    fetcher.set_routes({T0: [first, second]})
    await until(lambda: len(first.received[T0]) == 4 and len(second.received[T0]) == 4, "both tasks fed")
    assert first.received[T0] == second.received[T0] == [0, 1, 2, 3]


async def test_records_of_a_partition_no_task_owns_are_dropped(
    transport: MemoryTransport, consumer: CountingConsumer, running: Callable[..., Running]
) -> None:
    await produce(transport, T0, 3)
    await produce(transport, T1, 3)
    task0 = FakeTask(T0)
    fetcher = running().start()
    fetcher.set_routes({T0: [task0]})  # T1 was revoked: the consumer may still return its records
    await until(lambda: len(task0.received[T0]) == 3, "T0 routed")
    await polls_after(consumer, 3)
    assert fetcher.fetched == 3  # T1's records were not counted, nor handed to anyone
    assert set(task0.received) == {T0}


async def test_records_fetched_while_their_partition_was_revoked_are_dropped(
    transport: MemoryTransport, consumer: CountingConsumer, running: Callable[..., Running]
) -> None:
    old = FakeTask(T0)
    fetcher = running().start()
    fetcher.set_routes({T0: [old]})
    await polls_after(consumer, 1)  # a poll is in flight, waiting for records
    fetcher.set_routes({})  # revoke
    await produce(transport, T0, 2)
    await polls_after(consumer, 2)
    assert old.received[T0] == []
    assert fetcher.fetched == 0


# -- back-pressure -----------------------------------------------------------------------------------


async def test_a_full_buffer_leaves_its_partition_out_of_the_poll_until_drained_to_half(
    transport: MemoryTransport, consumer: CountingConsumer, running: Callable[..., Running]
) -> None:
    await produce(transport, T0, 20)
    await produce(transport, T1, 3)
    task0, task1 = FakeTask(T0), FakeTask(T1)
    fetcher = running(buffer_max_records=4, max_poll_records=4).start()
    fetcher.set_routes({T0: [task0], T1: [task1]})
    await until(lambda: len(task0.received[T0]) >= 4, "T0's buffer full")
    await polls_after(consumer, 3)
    assert task0.received[T0] == [0, 1, 2, 3]  # nothing more fetched while full
    assert T0 in fetcher.held_back and task0.queue(T0).held_back
    await until(lambda: len(task1.received[T1]) == 3, "T1 still fetched")  # other partitions go on
    assert T1 not in fetcher.held_back

    task0.take(T0, 1)  # 3 left: above the low-water mark (2)
    fetcher.drained(T0)
    await polls_after(consumer, 3)
    assert len(task0.received[T0]) == 4 and T0 in fetcher.held_back

    task0.take(T0, 1)  # 2 left: at the low-water mark
    fetcher.drained(T0)
    assert T0 not in fetcher.held_back and not task0.queue(T0).held_back
    await until(lambda: len(task0.received[T0]) == 8, "T0 fetched again")
    assert task0.received[T0] == list(range(8))
    assert T0 in fetcher.held_back  # full again (2 + 4 >= 4)


async def test_with_every_buffer_full_the_fetcher_stops_polling_until_one_drains(
    transport: MemoryTransport, consumer: CountingConsumer, running: Callable[..., Running]
) -> None:
    await produce(transport, T0, 10)
    task0 = FakeTask(T0)
    fetcher = running(buffer_max_records=4, max_poll_records=4).start()
    fetcher.set_routes({T0: [task0]})
    await until(lambda: T0 in fetcher.held_back, "T0 paused")
    polls = consumer.polls
    await asyncio.sleep(0.05)  # several partial-poll timeouts' worth
    assert consumer.polls == polls  # waiting for room, not spinning on empty polls
    task0.take(T0, 4)
    fetcher.drained(T0)
    await until(lambda: len(task0.received[T0]) == 8, "polling again after the drain")


async def test_new_routes_with_empty_queues_are_polled_again(
    transport: MemoryTransport, running: Callable[..., Running]
) -> None:
    await produce(transport, T0, 10)
    before = FakeTask(T0)
    fetcher = running(buffer_max_records=4, max_poll_records=4).start()
    fetcher.set_routes({T0: [before]})
    await until(lambda: T0 in fetcher.held_back, "T0 paused")
    after = FakeTask(T0)  # a rebalance built a new task with an empty queue
    fetcher.set_routes({T0: [after]})
    assert T0 not in fetcher.held_back
    await until(lambda: len(after.received[T0]) >= 4, "the new task is fed")
    assert after.received[T0][:4] == [4, 5, 6, 7]


async def test_drained_for_a_partition_that_is_not_paused_changes_nothing(running: Callable[..., Running]) -> None:
    task0 = FakeTask(T0)
    fetcher = running().fetcher
    fetcher.set_routes({T0: [task0]})
    fetcher.drained(T0)
    fetcher.drained(T1)  # not routed at all
    assert fetcher.held_back == set()


# -- with real tasks ------------------------------------------------------------------------------------


async def test_real_tasks_get_every_record_in_order_through_many_pauses(
    transport: MemoryTransport, consumer: CountingConsumer, running: Callable[..., Running]
) -> None:
    """The task calls the fetcher's drained() as it works through its buffer: with a buffer of 8
    and 200 records, nothing arrives unless the partition is resumed again and again."""
    await produce(transport, T0, 200)
    await produce(transport, T1, 50)
    app = agentstream.App("fetchtest", broker=URL, store="memory://", web_enabled=False)
    seen: dict[int, list[int]] = {0: [], 1: []}

    @app.agent(app.topic("t", value_type=int, partitions=2))
    async def agent(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            seen[event.partition].append(event.value)
            await asyncio.sleep(0)

    await app.discover()
    st = app.topology().subtopologies[0]
    crashes: list[BaseException] = []
    errors = ErrorPolicy(app, crashes.append)
    r = running(buffer_max_records=8, max_poll_records=5)
    fetcher = r.fetcher
    resumed: list[TP] = []

    def drained(tp: TP) -> None:
        was_paused = tp in fetcher.held_back
        fetcher.drained(tp)
        if was_paused and tp not in fetcher.held_back:
            resumed.append(tp)

    tasks = [
        StreamTask(
            TaskId(0, p),
            st,
            [TP("t", p)],
            errors=errors,
            max_task_idle=0.0,
            buffer_max_records=8,
            lagging=lambda q: False,
            on_drained=drained,
        )
        for p in (0, 1)
    ]
    fetcher.set_routes({T0: [tasks[0]], T1: [tasks[1]]})
    for t in tasks:
        t.start()
    r.start()
    try:
        await until(lambda: len(seen[0]) == 200 and len(seen[1]) == 50, "every record handled")
        assert seen[0] == list(range(200)) and seen[1] == list(range(50))
        assert resumed.count(T0) >= 10  # paused when full, resumed by the task's drain, many times
        await until(lambda: tasks[0].committable.get(T0) == 200, "all committable")
        assert crashes == []
    finally:
        for t in tasks:
            await t.stop(1.0)
