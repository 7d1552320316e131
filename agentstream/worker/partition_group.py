"""Which buffered record a task handles next (Kafka Streams' PartitionGroup and RecordQueue).

The head with the lowest timestamp goes first, so a task with several inputs sees records in
event-time order. When an input's buffer is empty while the broker still has records for it,
the task waits, at most ``max_task_idle`` seconds, before it goes on without that input.
Pure logic: no I/O, an injectable clock, so the choice is unit-tested directly. Compiled with
mypyc (setup.py ``COMPILED``): the task reads its queues once per record.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Final

from ..codecs import BaseCodec, RawCodec
from ..transport.base import TP, Message

__all__ = ["RecordQueue", "PartitionGroup", "Wait"]


class Wait:
    """Returned by :meth:`PartitionGroup.next` when the task should wait ``seconds`` for a
    lagging input before it takes a record."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __repr__(self) -> str:
        return f"Wait({self.seconds})"


FETCH_WAIT: Final = 1.0
"""max_task_idle=0: how long a task waits at most for the fetch of an input with known lag."""


_RAW: Final = RawCodec()


class RecordQueue:
    """The bounded buffer of one input partition of one task."""

    def __init__(self, tp: TP) -> None:
        self.tp = tp
        # The topic's (key codec, value codec) behind the compiled codec interface, set by the task
        # that owns the queue (raw bytes until then)
        self.decoders: tuple[BaseCodec, BaseCodec] = (_RAW, _RAW)
        self.messages: deque[Message] = deque()
        self.next_offset: int | None = None  # offset after the last buffered record
        self.held_back = False  # full: the fetcher leaves the partition out of its polls until it drains

    def add(self, messages: Iterable[Message]) -> int:
        self.messages.extend(messages)
        if self.messages:
            self.next_offset = self.messages[-1].offset + 1
        return len(self.messages)

    def clear(self) -> None:
        self.messages.clear()

    def __len__(self) -> int:
        return len(self.messages)


class PartitionGroup:
    """The input queues of one task and the timestamp-ordered choice between them."""

    def __init__(
        self,
        partitions: Iterable[TP],
        *,
        max_task_idle: float = 0.0,
        lagging: Callable[[RecordQueue], bool | None] = lambda q: False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.queues: dict[TP, RecordQueue] = {tp: RecordQueue(tp) for tp in sorted(partitions)}
        self._order = list(self.queues.values())
        self._single = self._order[0] if len(self._order) == 1 else None
        self.max_task_idle = max_task_idle
        self._lagging = lagging
        self._clock = clock
        self._idle_since: float | None = None
        self.last: RecordQueue | None = self._single  # the queue the last record came from
        self.enforced = 0  # times the task went on without a lagging input (KS's enforced processing)

    def add(self, tp: TP, messages: Iterable[Message]) -> int:
        return self.queues[tp].add(messages)

    def buffered(self) -> int:
        return sum(len(q) for q in self._order)

    def next(self) -> Message | Wait | None:
        """The next record, a :class:`Wait` in seconds, or None when nothing is buffered."""
        single = self._single
        if single is not None:
            return single.messages.popleft() if single.messages else None
        best: RecordQueue | None = None
        best_ts = 0
        empty_lagging = False
        idle = self.max_task_idle
        for q in self._order:
            if q.messages:
                ts = q.messages[0].timestamp_ms
                if best is None or ts < best_ts:
                    best, best_ts = q, ts
            elif not empty_lagging:
                lag = self._lagging(q)
                # > 0: wait while the lag is known or unknown; 0 (KIP-695): only while it is known
                # (the broker has the records, their fetch is on its way), at most FETCH_WAIT.
                empty_lagging = lag is True or (lag is None and idle > 0)
        if best is None:
            self._idle_since = None
            return None
        if empty_lagging:
            now = self._clock()
            if self._idle_since is None:
                self._idle_since = now
            waited = now - self._idle_since
            limit = idle if idle > 0 else FETCH_WAIT
            if waited < limit:
                return Wait(limit - waited)
            self.enforced += 1
        else:
            self._idle_since = None
        self.last = best
        return best.messages.popleft()
