"""Streams on their own: what the operators yield, and when each record is acknowledged.

A stream pulls from a :class:`~agentstream.streams.StreamInput`; here a small fake that hands
out events and records which were acknowledged (what a task turns into committable offsets).
Split points forward to real topics of an app on ``memory://``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any

import pytest

import agentstream
from agentstream.events import Event, current_event
from agentstream.exceptions import TopologyError
from agentstream.streams import SplitPoint, Stream
from agentstream.transport.memory import MemoryTransport
from agentstream.transport.message import Message
from tests.support.waiting import until


def event(offset: int, value: Any, key: Any = None, ts: int = 1000) -> Event:
    message = Message(
        "src",
        0,
        offset,
        ts + offset,
        0,
        None if key is None else str(key).encode(),
        b"%d" % value if isinstance(value, int) else None,
        None,
        -1,
        -1,
        (),
    )
    return Event(key, value, message)


class FakeInput:
    """Hands out fed events in order; ``next_event`` waits for one (or until ``timeout``)."""

    def __init__(self, stage: int = 0, resolve: Callable[[SplitPoint], None] | None = None) -> None:
        self.stage = stage
        self.queue: deque[Event] = deque()
        self.fed = asyncio.Event()
        self.acked: list[int] = []  # offsets
        self.points: list[SplitPoint] = []
        self.resolve = resolve
        self.offset = 0

    def feed(self, *values: Any, keys: list[Any] | None = None) -> list[Event]:
        out = []
        for i, v in enumerate(values):
            out.append(event(self.offset, v, None if keys is None else keys[i]))
            self.offset += 1
        self.queue.extend(out)
        self.fed.set()
        return out

    async def next_event(self, timeout: float | None = None) -> Event | None:
        while not self.queue:
            self.fed.clear()
            try:
                await asyncio.wait_for(self.fed.wait(), timeout)
            except TimeoutError:
                return None
        return self.queue.popleft()

    def ack(self, ev: Event) -> None:
        self.acked.append(ev.offset)

    def split(self, index: int, point: SplitPoint) -> SplitPoint:
        if index > len(self.points):
            if self.resolve is not None:
                self.resolve(point)
            self.points.append(point)
        return self.points[index - 1]


async def nxt(it: Any) -> Any:
    return await asyncio.wait_for(it.__anext__(), 10)


# -- iteration and acknowledgement --------------------------------------------------------------------


async def test_a_record_is_acknowledged_when_the_agent_asks_for_the_next() -> None:
    inp = FakeInput()
    inp.feed(10, 11, 12)
    stream = Stream(inp)
    assert await nxt(stream) == 10
    assert inp.acked == []  # in hand while the agent works on it
    assert [e.offset for e in stream.in_hand()] == [0]
    assert await nxt(stream) == 11
    assert inp.acked == [0]
    assert await nxt(stream) == 12
    assert inp.acked == [0, 1]
    assert stream.current_event is not None and stream.current_event.offset == 2


async def test_the_current_event_is_the_record_in_hand() -> None:
    inp = FakeInput()
    inp.feed(1, 2)
    stream = Stream(inp)
    seen = []
    async for value in stream:
        ev = current_event()
        assert ev is not None
        seen.append((value, ev.offset))
        if len(seen) == 2:
            break
    assert seen == [(1, 0), (2, 1)]


async def test_events_and_items_give_the_record_and_its_key() -> None:
    inp = FakeInput()
    inp.feed(1, 2, keys=["a", "b"])
    events = Stream(inp).events()
    first = await nxt(events)
    assert (first.key, first.value, first.offset, first.topic) == ("a", 1, 0, "src")
    inp.feed(3, keys=["c"])
    items = Stream(inp).items()
    assert await nxt(items) == ("b", 2)
    assert await nxt(items) == ("c", 3)
    assert inp.acked == [1]  # the items stream acked its first record when asked for the second


async def test_ack_now_and_noack() -> None:
    inp = FakeInput()
    inp.feed(1, 2, 3)
    stream = Stream(inp)
    await nxt(stream)
    [held] = stream.in_hand()
    assert bool(stream.ack(held)) is True
    assert inp.acked == [0]
    assert bool(stream.ack(held)) is False  # once only
    manual = Stream(inp).noack()
    events = manual.events()
    second = await nxt(events)
    await nxt(events)
    assert inp.acked == [0]  # noack: asking for more acknowledges nothing
    manual.ack(second)
    assert inp.acked == [0, 1]


async def test_enumerate_counts_values() -> None:
    inp = FakeInput()
    inp.feed(5, 6)
    it = Stream(inp).enumerate(start=1)
    assert [await nxt(it), await nxt(it)] == [(1, 5), (2, 6)]


# -- filter -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_filter_yields_kept_values_and_acknowledges_dropped_ones_at_once(asynchronous: bool) -> None:
    inp = FakeInput()
    inp.feed(1, 2, 4, 5)

    async def odd_async(v: int) -> bool:
        await asyncio.sleep(0)
        return v % 2 == 1

    stream = Stream(inp).filter(odd_async if asynchronous else (lambda v: v % 2 == 1))
    assert await nxt(stream) == 1
    assert inp.acked == []
    assert await nxt(stream) == 5
    assert inp.acked == [0, 1, 2]  # 1 handled; 2 and 4 dropped on the way
    assert [e.offset for e in stream.in_hand()] == [3]


async def test_a_record_an_operation_raised_on_stays_in_hand_for_the_error_policy() -> None:
    inp = FakeInput()
    inp.feed(1, 0, 2)
    stream = Stream(inp).filter(lambda v: 10 // v > 0)
    assert await nxt(stream) == 1
    with pytest.raises(ZeroDivisionError):
        await nxt(stream)
    assert inp.acked == [0]
    assert [e.offset for e in stream.in_hand()] == [1]  # the policy acts on this record
    stream.ack_pending()  # what the task does after applying the policy
    assert inp.acked == [0, 1]
    assert await nxt(stream) == 2


# -- take ---------------------------------------------------------------------------------------------


async def test_take_gives_full_batches_at_once_and_acknowledges_a_batch_when_the_next_is_asked() -> None:
    inp = FakeInput()
    inp.feed(*range(6))
    batches = Stream(inp).take(3, within=3600)  # a full batch never waits for `within`
    assert await nxt(batches) == [0, 1, 2]
    assert inp.acked == []
    assert await nxt(batches) == [3, 4, 5]
    assert inp.acked == [0, 1, 2]


async def test_take_yields_a_partial_batch_when_within_passes() -> None:
    inp = FakeInput()
    inp.feed(1, 2)
    batches = Stream(inp).take(100, within=timedelta(milliseconds=20))
    assert await nxt(batches) == [1, 2]
    inp.feed(3)
    assert await nxt(batches) == [3]
    assert inp.acked == [0, 1]


async def test_take_events_and_the_batch_in_hand() -> None:
    inp = FakeInput()
    inp.feed(1, 2)
    stream = Stream(inp)
    batches = stream.take_events(2, within=3600)
    batch = await nxt(batches)
    assert [e.offset for e in batch] == [0, 1]
    assert [e.offset for e in stream.in_hand()] == [0, 1]  # a failure now acts on the whole batch


async def test_take_refuses_an_empty_batch_size() -> None:
    with pytest.raises(ValueError, match="max_"):
        await nxt(Stream(FakeInput()).take(0, within=1))


# -- split points --------------------------------------------------------------------------------------


@pytest.fixture
async def app() -> AsyncIterator[agentstream.App]:
    a = agentstream.App(
        f"st{uuid.uuid4().hex[:6]}",
        broker=f"memory://streams-{uuid.uuid4().hex[:6]}",
        store="memory://",
        web_enabled=False,
    )
    yield a
    await a.stop_clients()


async def declare(app: agentstream.App, name: str, **options: Any) -> Any:
    """A topic of the app, created on its broker (the worker creates them at start)."""
    topic = app.topic(name, **options)
    await app.transport.ensure_topics([topic.spec()])
    return topic


def records(app: agentstream.App, topic: str) -> list[Any]:
    transport = app.transport
    assert isinstance(transport, MemoryTransport)
    return transport.read_topic(topic)


async def test_group_by_in_the_source_task_forwards_rekeyed_records_and_yields_nothing(app: agentstream.App) -> None:
    rekeyed = await declare(app, "by-user", key_type=str)

    def resolve(point: SplitPoint) -> None:
        point.topic = rekeyed

    inp = FakeInput(stage=0, resolve=resolve)
    inp.feed(21, 30, 41)
    stream = Stream(inp).filter(lambda v: v != 30).group_by(lambda v: f"u{v % 10}", name="user")
    got: list[Any] = []
    agent = asyncio.ensure_future(stream.__anext__())
    try:
        await until(lambda: len(records(app, "by-user")) == 2, "two records forwarded")
        await until(lambda: inp.acked == [0, 1, 2], "every source record acknowledged")
        assert not agent.done()  # this sub-topology ends at the split: nothing reaches the agent
    finally:
        agent.cancel()
        got = records(app, "by-user")
    assert [(m.key, m.value, m.timestamp_ms) for m in got] == [(b"u1", b"21", 1000), (b"u1", b"41", 1002)]
    assert inp.points[0].kind == "group_by" and inp.points[0].name == "user"


async def test_group_by_in_the_repartitioned_task_yields_without_reapplying_earlier_operations() -> None:
    inp = FakeInput(stage=1)
    inp.feed(30, 41)
    stream = Stream(inp).filter(lambda v: v != 30).group_by(lambda v: v % 10, name="user")
    assert await nxt(stream) == 30  # the filter ran upstream, before the repartition topic
    assert await nxt(stream) == 41
    assert inp.acked == [0]


async def test_through_forwards_encoded_records_to_its_topic(app: agentstream.App) -> None:
    enriched = await declare(app, "enriched", key_type=str, value_type=int)
    inp = FakeInput(stage=0)
    inp.feed(7, keys=["k"])
    stream = Stream(inp).through(enriched)
    agent = asyncio.ensure_future(stream.__anext__())
    try:
        await until(lambda: len(records(app, "enriched")) == 1, "one record forwarded")
    finally:
        agent.cancel()
    [m] = records(app, "enriched")
    assert (m.key, m.value) == (b"k", b"7")
    assert inp.acked == [0]


async def test_group_by_keys() -> None:
    with pytest.raises(TopologyError, match="needs a name"):
        Stream(FakeInput()).group_by(lambda v: v)
    with pytest.raises(TopologyError, match="callable, a Record field or a field name"):
        Stream(FakeInput()).group_by(42)
    inp = FakeInput(stage=1)
    Stream(inp).group_by("user")  # a field name names the split point
    assert inp.points[0].name == "user" and inp.points[0].key is not None
    assert inp.points[0].key({"user": "ann"}) == "ann"


# -- echo, tee, combine ----------------------------------------------------------------------------------


async def test_echo_sends_every_value_and_passes_it_on(app: agentstream.App) -> None:
    copy = await declare(app, "copy", key_type=str, value_type=int)
    inp = FakeInput()
    inp.feed(3, keys=["k"])
    assert await nxt(Stream(inp).echo(copy)) == 3
    [m] = records(app, "copy")
    assert (m.key, m.value) == (b"k", b"3")
    with pytest.raises(LookupError, match="no app to resolve topic 'copy'"):  # a name needs the stream's app
        Stream(inp).echo("copy")


async def test_tee_acknowledges_a_record_once_every_copy_moved_past_it() -> None:
    inp = FakeInput()
    inp.feed(1, 2)
    left, right = Stream(inp).tee(2)
    assert await nxt(left) == 1
    assert await nxt(left) == 2
    assert inp.acked == []  # right has not seen 1 yet
    assert await nxt(right) == 1
    assert await nxt(right) == 2
    assert inp.acked == [0]


async def test_a_tee_copy_read_ahead_waits_for_one_that_lags_instead_of_buffering_everything(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 45 finding 6: a copy that reads slowly (or never) held every record the others took."""
    import agentstream.streams as streams_module

    monkeypatch.setattr(streams_module, "TEE_MAX_BUFFERED", 3)
    inp = FakeInput()
    inp.feed(*range(100))
    left, right = Stream(inp).tee(2)
    assert [await nxt(left) for _ in range(3)] == [0, 1, 2]
    ahead = asyncio.ensure_future(left.__anext__())
    for _ in range(20):
        await asyncio.sleep(0)
    assert not ahead.done()  # right holds 3 unread: left waits rather than pull a 4th
    assert len(inp.queue) == 97  # nothing more taken from the source
    assert await nxt(right) == 0  # right takes one: room for one more
    assert await asyncio.wait_for(ahead, 10) == 3
    assert [await nxt(right) for _ in range(3)] == [1, 2, 3]
    assert [await nxt(left) for _ in range(2)] == [4, 5] and [await nxt(right) for _ in range(2)] == [4, 5]
    assert inp.acked == [0, 1, 2, 3, 4]  # each record once both copies moved past it: nothing lost
    assert len(inp.queue) == 94


async def test_combine_yields_from_either_stream_and_acks_each_on_its_own() -> None:
    a, b = FakeInput(), FakeInput()
    combined = Stream(a) & Stream(b)
    b.feed(2)
    assert await nxt(combined) == 2
    a.feed(1)
    assert await nxt(combined) == 1
    assert b.acked == [0] and a.acked == []
