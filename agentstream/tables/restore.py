"""Restore: replay changelog partitions into their stores until each reaches its end.

Runs on its own consumer (never the group consumer: Faust's recovery-hang lesson).

A partition is restored when the reader's *position* reaches the high watermark of a fetch
response (``consumer.highwater(tp)``): never "after a few empty polls" (a slow broker answers
empty fetches while data is still coming) and never from ListOffsets (wrong on the dev broker).
An empty poll only means "wait". A restore that makes no progress for ``restore_timeout``
seconds fails with :class:`~agentstream.exceptions.RestoreTimeout`.

A changelog record a store cannot hold (null key, or a value the table's codec cannot decode) is
skipped with a log line naming ``topic[partition]@offset`` and counted in :data:`SKIPPED`: one bad
record must never make a worker unable to start again.
"""

from __future__ import annotations

import collections
import logging
import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import orjson

from ..bulk_gc import bulk_gc
from ..clock import REAL_CLOCK, Clock
from ..codecs import Codec, JSONCodec
from ..exceptions import RestoreTimeout
from ..transport.base import TP, Consumer, Message
from .partition import TablePartition

if TYPE_CHECKING:
    from ..runtime import FaultPoints as FaultInjector  # testing_faults.FaultInjector is one

log = logging.getLogger("agentstream.tables")

__all__ = ["Restorer", "PROGRESS_EVERY", "SKIPPED", "changelog_columns", "changelog_entries", "restart_from"]

PROGRESS_EVERY = 3.0  # seconds between progress lines
# One poll's wait; an empty answer just means "wait", never "done". Short: the end of a partition
# is known from the high watermark of the reader's last fetch (an empty fetch of an empty or
# caught-up changelog comes back after the reader's short fetch wait), and the poll does not
# return before its timeout when a fetch brings no records.
POLL_MS = 50
DEFAULT_TIMEOUT = 300.0

# Changelog records skipped (null key or undecodable value), per changelog topic, since the
# process started: restore and standby following both count here.
SKIPPED: collections.Counter[str] = collections.Counter()


_KEY = operator.attrgetter("key")
_VALUE = operator.attrgetter("value")
_UNTYPED = (None, Any, object)
_TAG = b'"__faust"'  # JSONCodec revives values holding this tag: they may fail where orjson does not


def changelog_columns(part: TablePartition, messages: Sequence[Message]) -> tuple[list[bytes], list[bytes | None]]:
    """Keys and values of ``messages`` a store can hold, as two lists (for ``store.write_many``).

    The same records as :func:`changelog_entries`, checked a whole fetched batch at a time: key
    types by one set of types, values by the codec mapped over the batch in C (no Python loop per
    record). Only a batch with a bad record goes through :func:`changelog_entries`, which names,
    logs and counts each one it skips.
    """
    keys: list[Any] = list(map(_KEY, messages))
    values: list[bytes | None] = list(map(_VALUE, messages))
    if set(map(type, keys)) == {bytes} and _all_decodable(part.table.value_codec, values):
        return keys, values
    entries = changelog_entries(part, messages)
    return [k for k, _ in entries], [v for _, v in entries]


def _all_decodable(codec: Codec, values: list[bytes | None]) -> bool:
    """True when the codec decodes every non-null value (False: some fail, or it cannot tell)."""
    present = [v for v in values if v is not None] if None in values else cast("list[bytes]", values)
    try:
        if type(codec) is JSONCodec and codec.type_ in _UNTYPED:
            # JSONCodec.loads without a type: orjson, plus reviving tagged records.
            collections.deque(map(orjson.loads, present), 0)
            if _TAG not in b"\0".join(present):  # a tag never spans two values
                return True
        collections.deque(map(codec.loads, present), 0)
    except Exception:  # the per-record path finds which record and why
        return False
    return True


def changelog_entries(part: TablePartition, messages: Sequence[Message]) -> list[tuple[bytes, bytes | None]]:
    """The (key, value) pairs of ``messages`` a store can hold; the others are logged and counted.

    A null value is a tombstone (kept). Values are decoded with the table's codec once here, so a
    record that could never be read back does not poison the store (or a later read of its key).
    """
    loads = part.table.value_codec.loads
    out: list[tuple[bytes, bytes | None]] = []
    append = out.append
    for m in messages:
        key, value = m.key, m.value
        if key.__class__ is not bytes:
            if not isinstance(key, bytes):
                _skip(part, m, "it has no key" if key is None else f"its key is {type(key).__name__}, not bytes")
                continue
            key = bytes(key)
        if value is not None:  # None: a tombstone
            try:
                loads(value)
            except Exception as exc:  # any codec failure: the record is unusable, not fatal
                _skip(part, m, f"its value cannot be decoded ({type(exc).__name__}: {exc})")
                continue
        append((key, value))
    return out


def _skip(part: TablePartition, m: Message, problem: str) -> None:
    SKIPPED[m.topic] += 1
    log.warning(
        "skipping changelog record %s[%d]@%d of table %s: %s (%d skipped in %s so far)",
        m.topic,
        m.partition,
        m.offset,
        part.table.name,
        problem,
        SKIPPED[m.topic],
        m.topic,
    )


RESET = "the reader was reset to the changelog's start"


def restart_from(position: int, start: int, end: int | None) -> tuple[int, str] | None:
    """Where a changelog reader must start over, and why, when the store it fills cannot be kept.

    ``start``: the offset the store holds everything below (its checkpoint, or what its reader
    has written so far); ``end``: the high watermark of the reader's latest fetch. The store is
    wiped when the changelog was deleted or recreated under it, which a reader sees as either

    - a position below ``start``: the broker reset it (out of range: Kafka resets to the start);
    - a position beyond ``end``: a broker that answers a fetch past the end without an error (the
      dev broker) leaves it there, so it starts over from offset 0.

    Both readers ask it: the restore, and the follower of standby and warm-up copies (a host whose
    data dir outlived its changelog must not count its old checkpoint as caught up).
    """
    if position < start:
        return position, RESET
    if end is not None and position > end:
        return 0, f"it is beyond the changelog's end {end}"
    return None


class Restorer:
    """Replays changelog partitions into their stores until each reaches its fetch high watermark."""

    def __init__(
        self,
        consumer: Consumer,
        label: str,
        faults: FaultInjector | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        clock: Clock = REAL_CLOCK,
    ) -> None:
        self.consumer = consumer
        self.clock = clock  # the stall timeout's: virtual in the harness (a test advances past it)
        self.label = label
        self.restored = 0
        self.skipped = 0
        self.faults = faults
        self.timeout = timeout

    async def run(self, parts: dict[TP, TablePartition], *, batch: int = 10_000) -> int:
        if not parts:
            return 0
        with bulk_gc():
            return await self._run(parts, batch)

    async def _run(self, parts: dict[TP, TablePartition], batch: int) -> int:
        consumer = self.consumer
        consumer.assign(list(parts))
        consumer.resume(*parts)  # a reader reused from an earlier restore fetches every partition again
        starts: dict[TP, int] = {}
        for tp, part in parts.items():
            starts[tp] = part.changelog_offset or 0
            consumer.seek(tp, starts[tp])
        remaining = dict(parts)
        done = 0
        monotonic = self.clock.monotonic
        began = last_log = last_progress = monotonic()
        while True:
            for tp, part in list(remaining.items()):
                if await self._finished(tp, part, starts):
                    del remaining[tp]
                    consumer.pause(tp)  # no more fetches of it while the others restore
                    last_progress = monotonic()
            if not remaining:
                break
            now = monotonic()
            if now - last_progress > self.timeout:
                raise RestoreTimeout(self.label, self.timeout, self._where(remaining))
            if now - last_log >= PROGRESS_EVERY:
                self._progress(parts, starts, done, now - began)
                last_log = now
            batches = await consumer.getmany(*remaining, timeout_ms=POLL_MS, max_records=batch)
            for tp, messages in batches.items():
                found = remaining.get(tp)
                if found is None or not messages:
                    continue
                if messages[0].offset < starts[tp]:
                    # The reader was reset below the checkpoint: the changelog was deleted or
                    # recreated under it. Start over from an empty store.
                    self._wipe(tp, found, starts, messages[0].offset, RESET)
                keys, values = changelog_columns(found, messages)
                self.skipped += len(messages) - len(keys)
                if keys:
                    found.store.write_many(keys, values)
                found.changelog_offset = messages[-1].offset + 1
                done += len(messages)
                last_progress = monotonic()
                if self.faults is not None:
                    self.faults.check("mid_restore")
        for part in parts.values():
            part.checkpoint(force=True)
        self.restored += done
        elapsed = monotonic() - began
        log.info(
            "%s: restored %d records into %d partitions in %.2fs (%.0f records/s)%s",
            self.label,
            done,
            len(parts),
            elapsed,
            done / max(elapsed, 1e-9),
            f"; skipped {self.skipped} unusable changelog records" if self.skipped else "",
        )
        return done

    async def _finished(self, tp: TP, part: TablePartition, starts: dict[TP, int]) -> bool:
        """Has this partition's reader reached the high watermark of its latest fetch?"""
        consumer = self.consumer
        pos = await consumer.position(tp)
        hw = consumer.highwater(tp)
        restart = restart_from(pos, starts[tp], hw)
        if restart is not None:
            self._wipe(tp, part, starts, *restart)
            if restart[0] != pos:
                consumer.seek(tp, restart[0])
            return False
        if pos > (part.changelog_offset or 0):
            # Aborted transactions (and Kafka's commit markers) occupy offsets no record is
            # returned for: the reader's position, not the last record, says how far it got.
            part.changelog_offset = pos
        if hw is None:
            return False  # no fetch answered yet: wait
        return pos >= hw

    def _wipe(self, tp: TP, part: TablePartition, starts: dict[TP, int], new_start: int, why: str) -> None:
        log.warning(
            "%s: checkpoint %d of %s is unusable (%s); wiping the store and restoring from offset %d",
            self.label,
            starts[tp],
            tp,
            why,
            new_start,
        )
        part.store.wipe()
        part.changelog_offset = new_start
        starts[tp] = new_start

    def _where(self, remaining: dict[TP, TablePartition]) -> str:
        out = []
        for tp, part in sorted(remaining.items()):
            hw = self.consumer.highwater(tp)
            end = "an unknown end (no fetch was answered)" if hw is None else f"high watermark {hw}"
            out.append(f"{tp.topic}[{tp.partition}] at offset {part.changelog_offset or 0} of {end}")
        return ", ".join(out)

    def _progress(self, parts: dict[TP, TablePartition], starts: dict[TP, int], done: int, elapsed: float) -> None:
        total = 0
        for tp in parts:
            hw = self.consumer.highwater(tp)
            total += max(0, (hw if hw is not None else starts[tp]) - starts[tp])
        rate = done / max(elapsed, 1e-9)
        eta = f"ETA {(total - done) / rate:.0f}s" if rate > 0 and total > done else "ETA unknown"
        log.info("%s: restoring %d/%d records (%.0f records/s, %s)", self.label, done, total, rate, eta)
