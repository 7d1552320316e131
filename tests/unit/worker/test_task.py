"""The stream task on its own: what it promises the fetcher, the agent and the commit unit.

Built through its constructor from a real app's sub-topology; records are added as the fetcher
adds them (``task.add``), so no consumer or broker is involved.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import agentstream
from agentstream.exceptions import AgentError, StopProcessing
from agentstream.lifecycle import IllegalTransition, TaskState
from agentstream.transport.base import TP, TopicSpec
from agentstream.transport.memory import MemoryTransport
from agentstream.transport.message import Message
from agentstream.worker.eos import CommitGate
from agentstream.worker.errors import ErrorPolicy
from agentstream.worker.partition_group import RecordQueue
from agentstream.worker.task import StreamTask, TaskId
from tests.support.waiting import until

A0, B0 = TP("a", 0), TP("b", 0)


def rec(tp: TP, offset: int, value: bytes | None, ts: int | None = None) -> Message:
    return Message(
        tp.topic,
        tp.partition,
        offset,
        offset if ts is None else ts,
        0,
        None,
        value,
        None,
        -1,
        -1 if value is None else len(value),
        (),
    )


def values(tp: TP, *vs: int, start: int = 0, ts: list[int] | None = None) -> list[Message]:
    return [rec(tp, start + i, b"%d" % v, None if ts is None else ts[i]) for i, v in enumerate(vs)]


async def ticks(n: int = 20) -> None:
    """Let every ready coroutine run (no timer involved)."""
    for _ in range(n):
        await asyncio.sleep(0)


class Harness:
    """One app with one agent over ``topics`` and its task for partition 0."""

    def __init__(
        self,
        fun: Callable[[agentstream.Stream], Awaitable[None]],
        topics: tuple[str, ...] = ("a",),
        *,
        concurrency: int = 1,
        max_task_idle: float = 0.0,
        buffer_max_records: int = 100,
        lagging: Callable[[RecordQueue], bool | None] = lambda q: False,
        restart_max: int = 10,
        restart_backoff: float = 0.001,
        **settings: Any,
    ) -> None:
        self.app = agentstream.App(
            "tasktest", broker=f"memory://task-{uuid.uuid4().hex[:8]}", store="memory://", web_enabled=False, **settings
        )
        sources = [self.app.topic(name, value_type=int) for name in topics]
        self.agent = self.app.agent(sources, concurrency=concurrency)(fun)
        self.crashes: list[BaseException] = []
        self.drained: list[tuple[TP, int]] = []
        self.errors = ErrorPolicy(self.app, self.crashes.append)
        self.kwargs = dict(
            max_task_idle=max_task_idle,
            buffer_max_records=buffer_max_records,
            lagging=lagging,
            restart_max=restart_max,
            restart_backoff=restart_backoff,
        )
        self.task: StreamTask | None = None

    async def build(self, gated: bool = False, stage: int = 0) -> StreamTask:
        """``gated``: give the task an exactly_once commit gate, which sends every record through
        the task's async path (``next_event``) instead of its synchronous fast path (``poll_event``).
        ``stage``: the task of the agent's ``stage``-th sub-topology."""
        await self.app.discover()
        st = self.app.topology().subtopologies[stage]
        tps = [TP(name, 0) for name in st.source_topics]
        self.task = StreamTask(TaskId(st.id, 0), st, tps, errors=self.errors, on_drained=self._drained, **self.kwargs)  # type: ignore[arg-type]
        if gated:
            self.task.gate = CommitGate()
        return self.task

    def _drained(self, tp: TP) -> None:
        assert self.task is not None
        self.drained.append((tp, len(self.task.queue(tp))))


@pytest.fixture
async def stopper() -> Any:
    tasks: list[StreamTask] = []
    yield tasks
    for t in tasks:
        await t.stop(1.0)


# -- choice of the next record ------------------------------------------------------------------


@pytest.mark.parametrize("gated", [False, True], ids=["fast-path", "gated"])
async def test_records_reach_the_agent_lowest_head_timestamp_first_across_inputs(
    stopper: list[StreamTask], gated: bool
) -> None:
    seen: list[tuple[str, int]] = []

    async def agent(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            seen.append((event.topic, event.value))

    task = await Harness(agent, ("a", "b")).build(gated)
    stopper.append(task)
    task.add(A0, values(A0, 10, 30, 50, ts=[10, 30, 50]))
    task.add(B0, values(B0, 20, 40, ts=[20, 40]))
    task.start()
    await until(lambda: len(seen) == 5, "5 records handled")
    assert seen == [("a", 10), ("b", 20), ("a", 30), ("b", 40), ("a", 50)]


async def test_an_empty_lagging_input_holds_the_others_back_so_its_earlier_record_goes_first(
    stopper: list[StreamTask],
) -> None:
    seen: list[str] = []

    async def agent(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            seen.append(f"{event.topic}{event.value}")

    # b is empty but the broker has records for it: the task waits (up to max_task_idle).
    # (lagging as the worker tells it: the broker's end is past what the queue has fetched)
    task = await Harness(
        agent, ("a", "b"), max_task_idle=60.0, lagging=lambda q: q.tp == B0 and (q.next_offset or 0) < 1
    ).build()
    stopper.append(task)
    task.add(A0, values(A0, 2, ts=[200]))
    task.start()
    await ticks()
    assert seen == []  # a's record waits for b's fetch
    task.add(B0, values(B0, 1, ts=[100]))
    await until(lambda: len(seen) == 2, "both records handled")
    assert seen == ["b1", "a2"]


async def test_after_max_task_idle_the_task_goes_on_without_the_lagging_input(stopper: list[StreamTask]) -> None:
    seen: list[str] = []

    async def agent(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            seen.append(f"{event.topic}{event.value}")

    task = await Harness(agent, ("a", "b"), max_task_idle=0.05, lagging=lambda q: q.tp == B0).build()
    stopper.append(task)
    task.add(A0, values(A0, 1, 2, ts=[100, 200]))
    task.start()
    await until(lambda: seen == ["a1", "a2"], "a's records handled without b")
    assert task.group.enforced >= 1


async def test_an_empty_input_without_lag_is_not_waited_for(stopper: list[StreamTask]) -> None:
    seen: list[int] = []

    async def agent(stream: agentstream.Stream) -> None:
        async for v in stream:
            seen.append(v)

    task = await Harness(agent, ("a", "b"), max_task_idle=60.0, lagging=lambda q: False).build()
    stopper.append(task)
    task.add(A0, values(A0, 1))
    task.start()
    await until(lambda: seen == [1], "a's record handled at once")


# -- depth-first and committable offsets ----------------------------------------------------------


@pytest.mark.parametrize("gated", [False, True], ids=["fast-path", "gated"])
async def test_depth_first_the_next_record_is_taken_only_when_the_agent_asks_for_it(
    stopper: list[StreamTask], gated: bool
) -> None:
    release = asyncio.Event()
    seen: list[int] = []

    async def agent(stream: agentstream.Stream) -> None:
        async for v in stream:
            seen.append(v)
            if v == 0:
                await release.wait()

    task = await Harness(agent).build(gated)
    stopper.append(task)
    task.add(A0, values(A0, 0, 1, 2))
    task.start()
    await until(lambda: seen == [0], "first record in hand")
    await ticks()
    assert seen == [0]
    assert len(task.queue(A0)) == 2  # records 1 and 2 still buffered in the task, not handed out
    assert A0 not in task.committable
    release.set()
    await until(lambda: seen == [0, 1, 2], "all records")


@pytest.mark.parametrize("gated", [False, True], ids=["fast-path", "gated"])
async def test_committable_offset_is_last_handled_plus_one_never_the_record_in_hand(
    stopper: list[StreamTask], gated: bool
) -> None:
    release = asyncio.Event()
    seen: list[int] = []

    async def agent(stream: agentstream.Stream) -> None:
        async for v in stream:
            seen.append(v)
            if v == 2:
                await release.wait()

    task = await Harness(agent).build(gated)
    stopper.append(task)
    task.add(A0, values(A0, 0, 1, 2, 3, start=40))
    task.start()
    await until(lambda: seen == [0, 1, 2], "record 42 in hand")
    await ticks()
    assert task.committable == {A0: 42}  # 40 and 41 done; 42 is in hand
    release.set()
    await until(lambda: task.committable.get(A0) == 44, "offset 44 committable after the last record")
    assert task.processed == 4


async def test_committable_offsets_are_kept_per_input_partition(stopper: list[StreamTask]) -> None:
    async def agent(stream: agentstream.Stream) -> None:
        async for _ in stream:
            pass

    task = await Harness(agent, ("a", "b")).build()
    stopper.append(task)
    task.add(A0, values(A0, 1, 2, start=7, ts=[1, 2]))
    task.add(B0, values(B0, 1, start=3, ts=[3]))
    task.start()
    await until(lambda: task.committable == {A0: 9, B0: 4}, "both partitions committable")


async def test_concurrent_instances_commit_only_up_to_the_first_unfinished_record(stopper: list[StreamTask]) -> None:
    release = asyncio.Event()
    done: list[int] = []

    async def agent(stream: agentstream.Stream) -> None:
        async for v in stream:
            if v == 0:
                await release.wait()
            done.append(v)

    task = await Harness(agent, concurrency=2).build()
    stopper.append(task)
    task.add(A0, values(A0, 0, 1))
    task.start()
    await until(lambda: done == [1], "the second instance finished record 1")
    await ticks()
    assert A0 not in task.committable  # record 0 is still in hand: 1 must not be committed past it
    release.set()
    await until(lambda: task.committable.get(A0) == 2, "both records committable")


async def test_noack_records_acknowledged_out_of_order_commit_only_up_to_the_first_unacknowledged(
    stopper: list[StreamTask],
) -> None:
    """stream.noack(): the agent acknowledges records itself, in any order; an offset is never
    committable past a record it has not acknowledged (one instance, so not the concurrent case)."""
    held: list[Any] = []
    streams: list[agentstream.Stream] = []

    async def agent(stream: agentstream.Stream) -> None:
        records = stream.noack()
        streams.append(records)
        async for event in records.events():
            held.append(event)
            if len(held) == 3:
                records.ack(held[2])
                records.ack(held[1])

    task = await Harness(agent).build()
    stopper.append(task)
    task.add(A0, values(A0, 0, 1, 2, 3))
    task.start()
    await until(lambda: len(held) == 4, "every record in hand")
    await ticks()
    assert task.committable.get(A0) is None  # record 0 is not acknowledged: nothing past it
    assert streams[-1].ack(held[0])  # (streams[0] is the topology discovery's run of the agent)
    assert task.committable[A0] == 3 and task.processed == 3  # 0-2 acknowledged, 3 still in hand


async def test_a_noack_record_skipped_by_the_error_policy_does_not_hold_the_offset_back(
    stopper: list[StreamTask],
) -> None:
    """The agent fails on a record of a noack() stream: the policy skips it, so it counts as
    acknowledged (the restarted agent's acks carry the offset past it)."""

    async def agent(stream: agentstream.Stream) -> None:
        records = stream.noack()
        async for event in records.events():
            if event.value == 1:
                raise ValueError("bad value")
            records.ack(event)

    h = Harness(agent, on_agent_error="skip")
    task = await h.build()
    stopper.append(task)
    task.add(A0, values(A0, 0, 1, 2, 3))
    task.start()
    await until(lambda: task.committable.get(A0) == 4, "committed past every record, the skipped one too")
    assert h.errors.agent_errors == 1


async def test_noack_on_a_tee_copy_acknowledged_out_of_order_never_commits_past_an_unacknowledged_record(
    stopper: list[StreamTask],
) -> None:
    held: list[Any] = []
    copies: list[agentstream.Stream] = []

    async def agent(stream: agentstream.Stream) -> None:
        a, b = stream.tee(2)
        first = a.noack()
        copies.append(first)

        async def follow_b() -> None:
            async for _ in b:
                pass

        async def hold_a() -> None:
            async for event in first.events():
                held.append(event)
                if len(held) == 3:
                    first.ack(held[2])
                    first.ack(held[1])

        await asyncio.gather(follow_b(), hold_a())

    task = await Harness(agent).build()
    stopper.append(task)
    task.add(A0, values(A0, 0, 1, 2, 3))
    task.start()
    await until(lambda: len(held) == 4, "every record in hand of the noack copy")
    await ticks()
    assert task.committable.get(A0) is None  # record 0 is not acknowledged by the noack copy
    assert copies[-1].ack(held[0])
    await ticks()
    assert task.committable[A0] == 3


async def test_a_tee_noack_agent_that_fails_has_each_record_handled_once_and_the_offset_moves_on(
    stopper: list[StreamTask],
) -> None:
    """A tee'd record fails the agent: the policy sees it once (not once per copy), and the records
    the tee holds (in the copies' hands or buffers) are acknowledged, so the offset moves past them."""
    runs: list[int] = []

    async def agent(stream: agentstream.Stream) -> None:
        runs.append(1)
        a, b = stream.tee(2)
        first = a.noack()

        async def follow_b() -> None:
            async for _ in b:
                pass

        async def hold_a() -> None:
            async for event in first.events():
                if event.value == 1:
                    raise ValueError("bad value")
                first.ack(event)

        await asyncio.gather(follow_b(), hold_a())

    h = Harness(agent, on_agent_error="skip")
    handled: list[int] = []
    policy = h.errors.agent_failed

    async def agent_failed(task: Any, event: Any, exc: BaseException, attempts: int = 1) -> None:
        handled.append(event.offset)
        await policy(task, event, exc, attempts)

    h.errors.agent_failed = agent_failed  # type: ignore[method-assign]
    task = await h.build()
    stopper.append(task)
    task.add(A0, values(A0, 0, 1, 2))
    task.start()
    await until(lambda: bool(handled), "the agent failed")
    task.add(A0, values(A0, 3, 4, start=3))
    await until(lambda: task.committable.get(A0) == 5, "the offset moved past every record")
    assert 1 in handled and len(handled) == len(set(handled))  # each record the copies held: once
    assert len(runs) == 3  # the topology discovery's run, the run that failed, the restart


async def test_a_combined_stream_agent_that_fails_leaves_no_record_taken_and_unhandled(
    stopper: list[StreamTask],
) -> None:
    """combine() keeps a pull running per stream; when the agent fails, what a pull took goes to
    the policy and is acknowledged, and the pulls stop, so the restarted agent gets every later record."""
    got: list[int] = []

    async def agent(stream: agentstream.Stream) -> None:
        left = stream.filter(lambda v: True)  # two streams over the task's input: each record
        right = stream.filter(lambda v: True)  # goes to whichever pull takes it
        combined = (left & right).noack()
        async for event in combined.events():
            got.append(event.value)
            if event.value == 1:
                raise ValueError("bad value")
            combined.ack(event)

    h = Harness(agent, on_agent_error="skip")
    task = await h.build()
    stopper.append(task)
    task.add(A0, values(A0, 0, 1, 2))
    task.start()
    await until(lambda: h.errors.agent_errors >= 1, "the agent failed")
    task.add(A0, values(A0, 3, 4, 5, start=3))
    await until(lambda: {3, 4, 5} <= set(got), "the restarted agent got every later record")
    await until(lambda: task.committable.get(A0) == 6, "committed past every record")


async def test_noack_called_mid_record_does_not_acknowledge_that_record_before_the_next_is_taken(
    stopper: list[StreamTask],
) -> None:
    seen_committable: list[int | None] = []
    gate = asyncio.Event()

    async def agent(stream: agentstream.Stream) -> None:
        async for _value in stream:
            records = stream.noack()  # record 0 is still being handled
            await gate.wait()
            seen_committable.append(task.committable.get(A0))
            async for event in records.events():
                records.ack(event)

    task = await Harness(agent).build()
    stopper.append(task)
    task.add(A0, values(A0, 0, 1))
    task.start()
    await ticks()
    assert task.committable.get(A0) is None  # record 0 is in hand: not committable
    gate.set()
    await until(lambda: task.committable.get(A0) == 2, "both records acknowledged")
    assert seen_committable == [None]


# -- back-pressure ----------------------------------------------------------------------------------


async def test_add_reports_the_buffer_length_and_a_paused_queue_is_reported_drained_at_half(
    stopper: list[StreamTask],
) -> None:
    permits: asyncio.Queue[None] = asyncio.Queue()
    seen: list[int] = []

    async def agent(stream: agentstream.Stream) -> None:
        async for v in stream:
            seen.append(v)
            await permits.get()

    h = Harness(agent, buffer_max_records=4)
    task = await h.build()
    stopper.append(task)
    assert task.add(A0, values(A0, 0, 1)) == 2
    assert task.add(A0, values(A0, 2, 3, start=2)) == 4  # full: the fetcher marks the queue paused
    task.queue(A0).held_back = True
    task.start()
    await until(lambda: seen == [0], "record 0 in hand")
    await ticks()
    assert h.drained == []  # 3 left: above the low-water mark (half of buffer_max_records)
    permits.put_nowait(None)
    await until(lambda: seen == [0, 1], "record 1 in hand")
    assert h.drained[:1] == [(A0, 2)]
    for _ in range(3):
        permits.put_nowait(None)
    await until(lambda: seen == [0, 1, 2, 3], "all records")


async def test_a_queue_that_is_not_paused_is_never_reported_drained(stopper: list[StreamTask]) -> None:
    seen: list[int] = []

    async def agent(stream: agentstream.Stream) -> None:
        async for v in stream:
            seen.append(v)

    h = Harness(agent, buffer_max_records=4)
    task = await h.build()
    stopper.append(task)
    task.add(A0, values(A0, 0, 1, 2, 3))
    task.start()
    await until(lambda: len(seen) == 4, "all records")
    assert h.drained == []


# -- bad records: the app's policy, per record --------------------------------------------------------


@pytest.mark.parametrize("gated", [False, True], ids=["fast-path", "gated"])
async def test_an_undecodable_record_is_skipped_and_committed_past_under_skip(
    stopper: list[StreamTask], gated: bool
) -> None:
    seen: list[int] = []

    async def agent(stream: agentstream.Stream) -> None:
        async for v in stream:
            seen.append(v)

    h = Harness(agent, on_decode_error="skip")
    task = await h.build(gated)
    stopper.append(task)
    task.add(A0, [rec(A0, 0, b"1"), rec(A0, 1, b"{not json"), rec(A0, 2, b"3")])
    task.start()
    await until(lambda: task.committable.get(A0) == 3, "committed past the bad record")
    assert seen == [1, 3]
    assert h.errors.decode_errors == 1
    assert h.crashes == []


async def test_an_undecodable_record_stops_the_task_uncommitted_under_stop(stopper: list[StreamTask]) -> None:
    seen: list[int] = []

    async def agent(stream: agentstream.Stream) -> None:
        async for v in stream:
            seen.append(v)

    h = Harness(agent, on_decode_error="stop")
    task = await h.build()
    stopper.append(task)
    task.add(A0, [rec(A0, 0, b"1"), rec(A0, 1, b"{not json"), rec(A0, 2, b"3")])
    task.start()
    await until(lambda: bool(h.crashes), "the task crashed")
    assert isinstance(h.crashes[0], StopProcessing)
    assert "a[0]@1" in str(h.crashes[0])
    assert seen == [1]
    assert task.committable.get(A0) == 1  # never past the bad record


@pytest.mark.parametrize("gated", [False, True], ids=["fast-path", "gated"])
async def test_an_agent_error_on_a_record_skips_that_record_and_the_agent_goes_on(
    stopper: list[StreamTask], gated: bool
) -> None:
    seen: list[int] = []

    async def agent(stream: agentstream.Stream) -> None:
        async for v in stream:
            if v == 2:
                raise ValueError("bad value")
            seen.append(v)

    h = Harness(agent, on_agent_error="skip")
    task = await h.build(gated)
    stopper.append(task)
    task.add(A0, values(A0, 1, 2, 3))
    task.start()
    await until(lambda: task.committable.get(A0) == 3, "committed past every record")
    assert seen == [1, 3]
    assert h.errors.agent_errors == 1
    assert h.crashes == []


async def test_an_agent_error_under_stop_crashes_without_committing_the_record(stopper: list[StreamTask]) -> None:
    async def agent(stream: agentstream.Stream) -> None:
        async for v in stream:
            if v == 2:
                raise ValueError("bad value")

    h = Harness(agent, on_agent_error="stop")
    task = await h.build()
    stopper.append(task)
    task.add(A0, values(A0, 1, 2, 3))
    task.start()
    await until(lambda: bool(h.crashes), "the task crashed")
    assert isinstance(h.crashes[0], StopProcessing)
    assert task.committable.get(A0) == 1


async def test_an_agent_failing_before_any_record_is_restarted_then_stops_after_restart_max(
    stopper: list[StreamTask],
) -> None:
    calls: list[int] = []
    armed = [False]

    async def agent(stream: agentstream.Stream) -> None:
        if armed[0]:
            calls.append(1)
            raise RuntimeError("cannot start")
        async for _ in stream:
            pass

    h = Harness(agent, restart_max=2, restart_backoff=0.001)
    task = await h.build()
    armed[0] = True
    stopper.append(task)
    task.start()
    await until(lambda: bool(h.crashes), "the task gave up")
    assert isinstance(h.crashes[0], RuntimeError)
    assert len(calls) == 3  # the first run and restart_max restarts


async def test_a_dead_lettered_record_is_copied_with_the_error_and_committed_past(stopper: list[StreamTask]) -> None:
    seen: list[int] = []

    async def agent(stream: agentstream.Stream) -> None:
        async for v in stream:
            if v == 2:
                raise ValueError("two is not allowed")
            seen.append(v)

    h = Harness(agent, on_agent_error="dead-letter", on_decode_error="dead-letter")
    transport = h.app.transport
    assert isinstance(transport, MemoryTransport)
    await transport.ensure_topics([TopicSpec(h.app.settings.dead_letter_topic, 1)])
    task = await h.build()
    stopper.append(task)
    task.add(A0, [rec(A0, 0, b"1"), rec(A0, 1, b"{bad"), rec(A0, 2, b"2"), rec(A0, 3, b"3")])
    task.start()
    await until(lambda: task.committable.get(A0) == 4, "committed past both bad records")
    assert seen == [1, 3]
    letters = transport.read_topic(h.app.settings.dead_letter_topic)
    assert [m.value for m in letters] == [b"{bad", b"2"]
    headers = [dict(m.headers) for m in letters]
    assert [hd["agentstream-source"] for hd in headers] == [b"a[0]@1", b"a[0]@2"]
    assert [hd["agentstream-error-stage"] for hd in headers] == [b"decode", b"agent"]
    assert b"two is not allowed" in headers[1]["agentstream-error"]
    await h.app.stop_clients()


async def test_an_agent_that_changes_its_stream_operations_between_runs_is_stopped_with_the_reason(
    stopper: list[StreamTask],
) -> None:
    """The topology is found once (discovery); an agent that then builds another split point would
    send records to a sub-topology that does not exist."""
    discovered = [False]

    async def agent(stream: agentstream.Stream) -> None:
        name = "later" if discovered[0] else "first"
        async for _ in stream.group_by(lambda v: v, name=name):
            pass

    h = Harness(agent, on_agent_error="stop")
    task = await h.build(stage=1)  # the stage that runs the agent body (stage 0 only forwards)
    discovered[0] = True
    stopper.append(task)
    task.start()
    await until(lambda: bool(h.crashes), "the task stopped")
    assert isinstance(h.crashes[0], (AgentError, StopProcessing))
    assert "same stream operations" in str(h.crashes[0]) or "same stream operations" in str(h.crashes[0].__cause__)


# -- lifecycle --------------------------------------------------------------------------------------


async def test_task_lifecycle_created_restoring_running_closed(stopper: list[StreamTask]) -> None:
    async def agent(stream: agentstream.Stream) -> None:
        async for _ in stream:
            pass

    task = await Harness(agent).build()
    assert task.state is TaskState.CREATED
    assert str(task.id) == "0_0"
    task.restoring()
    assert task.state is TaskState.RESTORING
    task.start()
    assert task.state is TaskState.RUNNING
    assert task.running()
    with pytest.raises(IllegalTransition):
        task.restoring()  # running -> restoring is not a transition (suspend first)
    await task.stop(1.0)
    assert task.state is TaskState.CLOSED
    assert not task.running()
    with pytest.raises(IllegalTransition):
        task.restoring()
    with pytest.raises(IllegalTransition):
        task.start()


async def test_start_from_created_goes_through_restoring() -> None:
    async def agent(stream: agentstream.Stream) -> None:
        async for _ in stream:
            pass

    task = await Harness(agent).build()
    task.start()
    assert task.state is TaskState.RUNNING
    await task.stop(1.0)


async def test_stop_lets_the_record_in_hand_finish_and_drops_the_buffer(stopper: list[StreamTask]) -> None:
    release = asyncio.Event()
    finished: list[int] = []

    async def agent(stream: agentstream.Stream) -> None:
        async for v in stream:
            await release.wait()
            finished.append(v)

    h = Harness(agent)
    task = await h.build()
    task.add(A0, values(A0, 0, 1, 2))
    task.start()
    await ticks()
    stopping = asyncio.ensure_future(task.stop(30.0))
    await ticks()
    assert not stopping.done()  # waits for the record in hand
    release.set()
    await asyncio.wait_for(stopping, 10)
    assert finished == [0]  # no new record after stop()
    assert len(task.queue(A0)) == 0
    assert h.crashes == []  # the agent's next ask ends it quietly (WorkerStopped)
    assert task.committable == {A0: 1}  # the finished record is committable, the dropped ones are not


async def test_stop_cancels_an_agent_that_does_not_finish_within_the_timeout() -> None:
    async def agent(stream: agentstream.Stream) -> None:
        async for _ in stream:
            await asyncio.Event().wait()  # never finishes

    h = Harness(agent)
    task = await h.build()
    task.add(A0, values(A0, 0))
    task.start()
    await ticks()
    await asyncio.wait_for(task.stop(0.05), 10)
    assert not task.running()
    assert A0 not in task.committable  # the cancelled record is handled again by the next owner
    assert h.crashes == []


# -- exactly_once: the commit gate ------------------------------------------------------------------


async def test_an_instance_back_from_its_restart_backoff_waits_while_a_commit_holds_the_gate() -> None:
    """An agent that failed before its first record leaves the gate during the backoff; when the
    backoff ends while a commit holds the gate closed, it must wait for the commit (``await
    gate.enter()``), not slip past it: the commit would otherwise run with the agent in the middle
    of its (re)start, sending into the transaction being committed."""
    armed = [False]
    runs: list[int] = []
    back_in = asyncio.Event()
    failed_once = asyncio.Event()

    async def agent(stream: agentstream.Stream) -> None:
        runs.append(1)
        if armed[0] and len(runs) == 1:
            failed_once.set()
            raise RuntimeError("fails before its first record")
        back_in.set()
        async for _ in stream:
            pass

    h = Harness(agent, restart_backoff=0.01, on_agent_error="skip")
    task = await h.build()  # discovery runs the agent once, up to its first record
    runs.clear()
    back_in.clear()
    armed[0] = True
    gate = CommitGate()
    task.gate = gate
    task.start()
    await asyncio.wait_for(failed_once.wait(), 10)  # in its backoff: it left the gate
    release = asyncio.Event()
    holding = asyncio.Event()
    busy_during_commit: list[int] = []

    async def commit() -> None:
        async with gate.closed():
            holding.set()
            await release.wait()
            busy_during_commit.append(gate.busy)

    committing = asyncio.ensure_future(commit())
    await asyncio.wait_for(holding.wait(), 10)
    # The backoff (10 ms) ends while the commit holds the gate: the agent must not run again yet.
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(asyncio.shield(back_in.wait()), 0.3)
    assert len(runs) == 1
    release.set()
    await asyncio.wait_for(committing, 10)
    assert busy_during_commit == [0]
    await asyncio.wait_for(back_in.wait(), 10)  # the commit done: the agent restarts
    assert len(runs) == 2
    await task.stop(1.0)
    assert h.crashes == []


async def test_a_commit_runs_while_the_agent_waits_for_records_and_holds_the_next_record_back() -> None:
    """Under exactly_once an instance waiting for records is outside the gate (a commit need not
    wait for traffic), and a record that arrives during the commit waits for it."""
    seen: list[int] = []

    async def agent(stream: agentstream.Stream) -> None:
        async for v in stream:
            seen.append(v)

    h = Harness(agent)
    task = await h.build()
    gate = CommitGate()
    task.gate = gate
    task.add(A0, values(A0, 1))
    task.start()
    await until(lambda: seen == [1], "first record handled")
    release = asyncio.Event()
    holding = asyncio.Event()

    async def commit() -> None:
        async with gate.closed():
            holding.set()
            await release.wait()

    committing = asyncio.ensure_future(commit())
    await asyncio.wait_for(holding.wait(), 10)  # not blocked by the idle agent
    task.add(A0, values(A0, 2, start=1))
    await ticks()
    assert seen == [1]  # taken from the buffer, but not handled inside the commit
    release.set()
    await asyncio.wait_for(committing, 10)
    await until(lambda: seen == [1, 2], "the record handled after the commit")
    await task.stop(1.0)
    assert h.crashes == []
