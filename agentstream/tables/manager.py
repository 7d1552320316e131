"""The worker's side of tables: opening store partitions, restoring them from the changelog,
following standby and global partitions, and the table steps of the commit sequence.

Restore uses its own consumer (never the group consumer, Faust's recovery-hang lesson) and is
complete when the position reaches the end seen in a fetch (the high watermark); an empty fetch
alone never means done, and ``end_offsets`` is not trusted (the dev broker gets it wrong).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..clock import clock_for
from ..exceptions import ConfigError, StoreCorrupt, StoreError, StoreUnavailable, TransportError
from ..lifecycle import PartitionState
from ..settings import path_component_problem
from ..transport.base import TP, Consumer
from .partition import TablePartition
from .restore import RESET, Restorer, changelog_entries, restart_from
from .store import destroy_store, persistent_store, read_checkpoint, store_for
from .table import Table

if TYPE_CHECKING:
    from ..runtime import FaultPoints, Runtime, TaskSender  # TaskSender: what sends a record
    from ..settings import Settings
    from ..types import AssignmentT as Assignment

log = logging.getLogger("agentstream.tables")

__all__ = ["TableManager", "Restorer", "ConsumerFactory", "check_store_paths"]

CHECKPOINT_FILE = "agentstream.checkpoint"
RESTORE_MAX_POLL_RECORDS = 10_000  # restore and standby reads want big batches, not the agents' poll size
# A restore learns a partition's end from a fetch's high watermark; for an empty (or caught-up)
# changelog that answer is an empty fetch, which the broker holds for the fetch wait. Restoring
# waits for it (tasks wait for the restore), so its reader asks with at most this wait; the
# standby reader, which runs idle most of the time, keeps the worker's consumer_fetch_max_wait.
RESTORE_FETCH_MAX_WAIT_MS = 20
# How long a starting worker tries to learn the changelog ends of the copies in its data dir.
ENDS_TIMEOUT_S = 2.0
UNSENT_MAX_BYTES = 64 << 20
"""About the most memory a worker's table writes may hold on their way to the changelog (written
through the caches, not yet taken by a commit). Past it the worker commits at once and its fetcher
hands out no records until the commit has taken them (``TableManager.room``): without the bound a
table written faster than its changelog is sent (a large state, every write a new key) held every
write since the last commit, more at each commit, which took longer each time (4 GB at 5M keys)."""
UNSENT_ENTRY_BYTES = 360
"""Python's memory for one write on its way to the changelog beyond its encoded key and value (the
partition's pending entry, the queued item, its tuples and the bytes objects' headers)."""


def restore_fetch_max_wait_ms(settings: Settings) -> int:
    """The restore reader's fetch wait: RESTORE_FETCH_MAX_WAIT_MS, or the worker's if shorter."""
    return min(RESTORE_FETCH_MAX_WAIT_MS, int(settings.consumer_fetch_max_wait * 1000))


def _copy_lag(offset: int, end: int) -> int:
    """How far a copy at changelog ``offset`` lags the changelog's ``end``. A copy beyond the end
    belongs to an older changelog: all of it is to read."""
    return end - offset if offset <= end else end


def _add_lag(out: dict[int, int | None], p: int, lag: int | None) -> None:
    """Add one table's lag to partition number ``p``'s sum; unknown (None) makes the sum unknown."""
    before = out.get(p, 0)
    out[p] = None if before is None or lag is None else before + lag


class ConsumerFactory(Protocol):
    """Makes a consumer outside the group (restore and standby reads): the app's consumer settings,
    with the manager's poll size (and, for restores, fetch wait); e.g.
    ``functools.partial(transport.consumer, group_id=None, **settings)``."""

    def __call__(self, *, max_poll_records: int, **settings: Any) -> Consumer: ...


async def _send_changelog(producer: Any, part: TablePartition, chunks: list[list[tuple[bytes, bytes | None]]]) -> None:
    """Send one partition's changelog records, in order (delivery is awaited by the producer flush)."""
    topic = part.table.changelog_topic.name
    partition = part.partition
    send_now = getattr(producer, "send_now", None)  # a transaction's sender has only send()
    last = part.last_send
    for items in chunks:
        for key, value in items:
            # the producer's synchronous append while its open batch has room: no coroutine per record
            delivery = None if send_now is None else send_now(topic, key, value, partition, None, None)
            last = await producer.send(topic, key, value, partition=partition) if delivery is None else delivery
    part.last_send = last


def _entry_bytes(part: TablePartition, items: list[tuple[bytes, bytes | None]]) -> float:
    """About the memory one of ``items`` holds until its commit: the partition's running mean of
    an entry's encoded size (measured exactly when the partition has no cache to learn it)."""
    size = part.entry_bytes
    if size <= 0.0 and items:
        size = sum(len(k) + (0 if v is None else len(v)) for k, v in items) / len(items)
    return UNSENT_ENTRY_BYTES + size


def check_store_paths(settings: Settings, tables: Iterable[Table]) -> None:
    """Refuse, naming what to change, an app id or a table name that cannot be one directory's name:
    each is a path component of a table's stores (``/x`` would make the path absolute, ``..`` leave
    the data dir). Called at worker start, before anything is created or deleted there."""
    settings.table_root()  # checks the id
    for table in tables:
        problem = path_component_problem(table.name)
        if problem is not None:
            raise ConfigError(
                "Table name",
                f"table {table.name!r} names the directory of its stores, but {problem}",
                "name the table with letters, digits, '.', '_' and '-' (not '.' or '..')",
            )


class TableManager:
    """Owns every :class:`TablePartition` of the worker and the table steps of a commit.

    Its collaborators are passed in, never looked up on an App (Quix's Checkpoint takes its producer,
    consumer and state manager the same way): the ``tables`` it serves, the app's ``settings`` (data dir,
    store, cache size, guarantee, restore timeout), ``consumers`` for its restore and standby reads, the
    started ``producer`` its changelog records go through (exactly_once: each task's own, given to
    :meth:`flush`), the worker's ``runtime`` (where the table
    partitions live and where table writes find this manager once it is started) and, in tests only,
    the worker's ``faults``.
    """

    def __init__(
        self,
        tables: Iterable[Table],
        *,
        settings: Settings,
        consumers: ConsumerFactory,
        producer: TaskSender,
        runtime: Runtime,
        faults: FaultPoints | None = None,
    ) -> None:
        self.tables: list[Table] = list(tables)
        self.settings = settings
        self.consumers = consumers
        self.producer = producer
        self.runtime = runtime
        self.faults = faults
        self.root = settings.table_root()
        self.store_url = settings.store
        self.cache_size = settings.table_cache_size
        self._sends: list[tuple[TablePartition, list[tuple[bytes, bytes | None]]]] = []
        # About the memory the writes in _sends hold (UNSENT_ENTRY_BYTES + encoded size each), and
        # the bound: past it ``room`` is cleared (the fetcher waits on it) and ``on_full`` runs (the
        # worker commits at once); the commit that takes them sets it again.
        self.unsent_bytes = 0.0
        self.max_unsent_bytes = UNSENT_MAX_BYTES
        self.room = asyncio.Event()
        self.room.set()
        self.on_full: Callable[[], None] | None = None
        self._restore_consumer: Consumer | None = None
        self._follow_consumer: Consumer | None = None
        self._follower: asyncio.Task[None] | None = None
        self._followed: dict[TP, TablePartition] = {}
        # (table, partition) -> changelog lag last seen (see lags()); kept across a revoke, when
        # following stops, so that the join after it reports what this worker's copies hold
        self._known_lags: dict[tuple[str, int], int | None] = {}
        # (table, partition) copies found in the data dir at start and not opened: reported at the
        # first join only (see _find_copies_on_disk)
        self._on_disk: set[tuple[str, int]] = set()
        self.restored_records = 0
        self.restoring = False
        self.eos = settings.processing_guarantee == "exactly_once"
        for table in self.tables:
            table.eos = self.eos and not table.is_global

    # -- store partitions ------------------------------------------------------------------------
    def _held(self, table: Table) -> dict[int, TablePartition]:
        parts: dict[int, TablePartition] = self.runtime.table_partitions(table.name)
        return parts

    def _open(self, table: Table, partition: int) -> TablePartition:
        part = self._held(table).get(partition)
        if part is not None:
            return part
        url = table.store_url or self.store_url
        path = self.root / table.name / str(partition)

        def wiping(exc: StoreCorrupt) -> None:
            log.warning(
                "table %s partition %d: store is corrupt (%s); wiping it and restoring from the changelog",
                table.name,
                partition,
                exc,
            )

        try:
            # a corrupt store is wiped by the store itself, under its lock: a second worker
            # sharing this data dir by mistake cannot wipe a live store it merely failed to open
            store = store_for(url, path, on_corrupt=wiping, memory_mb=self.settings.rocksdb_memory_mb)
        except StoreCorrupt as exc:
            wiping(exc)
            destroy_store(path)
            store = store_for(url, path, memory_mb=self.settings.rocksdb_memory_mb)
        except StoreUnavailable as exc:
            raise StoreUnavailable(
                path, f"{exc.problem}. Fix: give every worker on this machine its own --data-dir"
            ) from exc
        except (StoreError, OSError) as exc:
            raise self._unwritable(path, "open", exc) from exc
        # The checkpoint lives inside the store's directory, so wiping the store removes it too.
        part = TablePartition(
            table, partition, store, path / CHECKPOINT_FILE if store.persistent else None, self.cache_size
        )
        part.changelog = self.queue_send  # writes flow one way: table -> partition -> this queue -> producer
        if part.changelog_offset is None and len(store):
            log.info(
                "table %s partition %d: no checkpoint; wiping the store and restoring from the changelog",
                table.name,
                partition,
            )
            store.wipe()
        self._held(table)[partition] = part
        return part

    def _close(self, table: Table, partition: int) -> None:
        part = self._held(table).pop(partition, None)
        if part is not None:
            part.close()

    def _consumer(self, **settings: Any) -> Consumer:
        return self.consumers(max_poll_records=RESTORE_MAX_POLL_RECORDS, **settings)

    # -- lifecycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        """Open and restore the global tables, then take table writes: from here on they find this
        manager in the runtime and queue their changelog records with it."""
        self.runtime.tables = self
        self._restore_consumer = self._consumer(fetch_max_wait_ms=restore_fetch_max_wait_ms(self.settings))
        await self._restore_consumer.start()
        self._follow_consumer = self._consumer()
        await self._follow_consumer.start()
        global_parts: dict[TP, TablePartition] = {}
        for table in self.tables:
            if table.is_global:
                for p in range(table.partitions):
                    part = self._open(table, p)
                    part.restoring()
                    global_parts[TP(table.changelog_topic.name, p)] = part
        if global_parts:
            await self._restore(global_parts, "global tables")
        for part in global_parts.values():
            part.activate()
        self._follow(global_parts)
        await self._find_copies_on_disk()

    async def _find_copies_on_disk(self) -> None:
        """A worker (re)started on a data dir reports the copies it finds there at its first join,
        as Kafka Streams reports the task offsets in its state directory: the plan then leaves a
        restarted worker's partitions with it (restoring the tail written while it was down)
        instead of moving them to a member that must restore them whole. A copy's lag is its
        changelog's end, learnt from one short fetch, less its checkpoint; a partition number
        where one table has a copy and another none counts the missing one's whole changelog."""
        tables = [t for t in self.tables if not t.is_global and persistent_store(t.store_url or self.store_url)]
        checkpoints = {
            (t, p): read_checkpoint(self.root / t.name / str(p) / CHECKPOINT_FILE)
            for t in tables
            for p in range(t.partitions)
        }
        numbers = {p for (_, p), offset in checkpoints.items() if offset is not None}
        if not numbers:
            return
        offsets = {
            TP(t.changelog_topic.name, p): (t.name, p, offset or 0)
            for (t, p), offset in checkpoints.items()
            if p in numbers
        }
        ends = await self._changelog_ends({tp: offset for tp, (_, _, offset) in offsets.items()})
        for tp, (name, p, offset) in offsets.items():
            end = ends.get(tp)
            self._known_lags[(name, p)] = None if end is None else _copy_lag(offset, end)
            self._on_disk.add((name, p))
        log.info("copies in the data dir: lags %s (reported at the first join)", dict(sorted(self.lags().items())))

    async def _changelog_ends(self, starts: dict[TP, int]) -> dict[TP, int]:
        """Each changelog partition's end: a fetch's high watermark (the restore reader's short
        fetch wait); the records fetched are dropped. Bounded: an end not learnt in time is
        left out (that copy's lag is unknown, so not caught up)."""
        consumer = self._restore_consumer
        assert consumer is not None
        consumer.assign(list(starts))
        consumer.resume(*starts)
        for tp, offset in starts.items():
            consumer.seek(tp, offset)
        ends: dict[TP, int] = {}
        monotonic = clock_for(self.runtime.app).monotonic
        deadline = monotonic() + ENDS_TIMEOUT_S
        try:
            while len(ends) < len(starts) and monotonic() < deadline:
                await consumer.getmany(*[tp for tp in starts if tp not in ends], timeout_ms=50, max_records=1)
                for tp in starts:
                    hw = consumer.highwater(tp)
                    if hw is not None:
                        ends[tp] = hw
        except TransportError as exc:  # the copies' lags stay unknown: not caught up, which is safe
            log.warning("could not learn the changelog ends of the copies in the data dir: %s", exc)
        finally:
            consumer.assign([])
        return ends

    async def stop(self) -> None:
        if self._follower is not None:
            self._follower.cancel()
            await asyncio.gather(self._follower, return_exceptions=True)
        for consumer in (self._restore_consumer, self._follow_consumer):
            if consumer is not None:
                await consumer.stop()
        failed: StoreUnavailable | None = None
        for table in self.tables:
            for p in list(self._held(table)):
                part = self._held(table)[p]
                try:
                    # Only committed values reach the store: what the final commit did not deliver
                    # (a failed or cut-short commit, a write after it) is dropped, never written.
                    part.discard_uncommitted()
                    part.checkpoint(force=True)
                except (StoreError, OSError) as exc:  # still close every store, then report
                    failed = failed or self._unwritable(part.store.path, "write", exc)
                try:
                    self._close(table, p)
                except Exception as exc:  # rocksdict raises bare Exception from close()
                    failed = failed or self._unwritable(part.store.path, "close", exc)
        if self.runtime.tables is self:
            self.runtime.tables = None
        if failed is not None:
            raise failed

    async def _restore(self, parts: dict[TP, TablePartition], label: str) -> int:
        assert self._restore_consumer is not None
        self.restoring = True
        try:
            n = await Restorer(
                self._restore_consumer, label, self.faults, self.settings.restore_timeout, clock_for(self.runtime.app)
            ).run(parts)
        finally:
            self.restoring = False
            self._restore_consumer.assign([])
        self.restored_records += n
        return n

    async def on_assigned(self, assignment: Assignment) -> None:
        """Open active and standby partitions, restore the active ones; then tasks may start.

        Standbys (and global tables) are followed only from the restore's end: a new standby may
        have a whole changelog to read, which on the one event loop would slow the restore the
        tasks wait for (Kafka Streams restores active tasks before it updates standbys too)."""
        active, standby = set(assignment.active), set(assignment.standby) - set(assignment.active)
        self._on_disk.clear()  # the first assignment decided on them: from now on, what is held
        to_restore: dict[TP, TablePartition] = {}
        followed: dict[TP, TablePartition] = {}
        for table in self.tables:
            if table.is_global:
                for p, part in self._held(table).items():
                    followed[TP(table.changelog_topic.name, p)] = part
                continue
            for p in list(self._held(table)):
                if p not in active and p not in standby:
                    self._close(table, p)
            for p in active:
                if p < table.partitions:
                    part = self._open(table, p)
                    part.restoring()
                    to_restore[TP(table.changelog_topic.name, p)] = part
            for p in standby:
                if p < table.partitions:
                    part = self._open(table, p)
                    if part.state is not PartitionState.STANDBY:
                        part.standby()
                    followed[TP(table.changelog_topic.name, p)] = part
        if to_restore:  # first: the tasks wait for it, and standbys read on the same event loop
            await self._restore(to_restore, f"tables for partitions {sorted(active)}")
        self._follow(followed)
        for part in to_restore.values():
            part.activate()
        for table in self.tables:  # Faust's @table.on_recover: after every recovery, before agents resume
            await table.call_recover_callbacks()

    async def on_revoked(self, dirty: bool = False) -> None:
        """Every active partition is suspended (eager rebalance) to a standby; stores stay open for
        reuse. A standby holds no uncommitted writes: after the revoke's commit the cache and pending
        writes are empty, and after a failed one (``dirty``) what is left is dropped, so a later
        read or promotion sees the changelog's values, never stale ones."""
        self.lags()  # remembered as of now: the next join reports them (following stops here)
        self._follow({tp: p for tp, p in self._followed.items() if p.table.is_global})
        for table in self.tables:
            if not table.is_global:
                for part in self._held(table).values():
                    if part.state is not PartitionState.STANDBY:
                        if dirty and part.dirty():
                            self._known_lags[(table.name, part.partition)] = None  # must restore what it lost
                            log.warning(
                                "table %s partition %d: dropping writes the failed commit did not "
                                "deliver; the partition restores from the changelog",
                                table.name,
                                part.partition,
                            )
                        part.standby(dirty=True)
        self._recount()

    # -- standby / global following -----------------------------------------------------------------
    def _follow(self, parts: dict[TP, TablePartition]) -> None:
        if self._follower is not None:
            self._follower.cancel()
            self._follower = None
        self._followed = parts
        if parts and self._follow_consumer is not None:
            self._follower = asyncio.ensure_future(self._follow_loop(dict(parts)))

    async def _follow_loop(self, parts: dict[TP, TablePartition]) -> None:
        consumer = self._follow_consumer
        assert consumer is not None
        consumer.assign(list(parts))
        for tp, part in parts.items():
            consumer.seek(tp, part.changelog_offset or 0)
        last_checkpoint = time.monotonic()
        while True:
            batches = await consumer.getmany(timeout_ms=500, max_records=10_000)
            for tp, messages in batches.items():
                part = parts[tp]
                if messages[0].offset < (part.changelog_offset or 0) and not part.active:
                    self._refollow(tp, part, messages[0].offset, RESET)  # reset, and these came from there
                part.store.write_batch(changelog_entries(part, messages))  # skips null-key/undecodable records
                part.changelog_offset = messages[-1].offset + 1
            for tp, part in parts.items():
                if part.active:
                    continue  # a global table's: restored (and checked) before it became active
                pos = await consumer.position(tp)
                restart = restart_from(pos, part.changelog_offset or 0, consumer.highwater(tp))
                if restart is not None:
                    self._refollow(tp, part, *restart)
                    if restart[0] != pos:
                        consumer.seek(tp, restart[0])
                elif pos > (part.changelog_offset or 0):
                    part.changelog_offset = pos  # transaction markers hold offsets no record comes for
            if time.monotonic() - last_checkpoint > self.settings.commit_interval:
                for part in parts.values():
                    if not part.active:
                        part.checkpoint()
                last_checkpoint = time.monotonic()

    def _refollow(self, tp: TP, part: TablePartition, offset: int, why: str) -> None:
        """A standby or warm-up copy whose changelog was deleted or recreated: start it over empty."""
        log.warning(
            "table %s partition %d: the standby copy at changelog offset %d of %s is unusable (%s); "
            "wiping it and following from offset %d",
            part.table.name,
            part.partition,
            part.changelog_offset or 0,
            tp,
            why,
            offset,
        )
        part.store.wipe()
        part.changelog_offset = offset

    # -- commit steps -----------------------------------------------------------------------------------
    async def settle_callbacks(self) -> None:
        """Commit step 0: wait for the ``async`` on_window_close callbacks started so far, so their
        sends and writes belong to the commit of the record that closed the window."""
        for table in self.tables:
            state = table._windowed
            while state is not None and state.callbacks:
                await asyncio.gather(*list(state.callbacks), return_exceptions=True)

    def lags(self) -> dict[int, int | None]:
        """Per partition number this worker holds table state for: how many changelog records its
        copy lags behind, summed over the tables (0 for an active partition; None while the end of a
        followed changelog is not known yet). What the group leader's lag-aware plan reads."""
        out: dict[int, int | None] = {}
        consumer = self._follow_consumer
        known = self._known_lags
        for table in self.tables:
            if table.is_global:
                continue
            for p, part in self._held(table).items():
                lag: int | None
                tp = TP(table.changelog_topic.name, p)
                if part.active:
                    lag = 0
                elif consumer is not None and tp in self._followed and (end := consumer.highwater(tp)) is not None:
                    lag = _copy_lag(part.changelog_offset or 0, end)
                else:  # not followed now (between a revoke and the next assignment): as last seen
                    lag = known.get((table.name, p))
                known[(table.name, p)] = lag
                _add_lag(out, p, lag)
        held = set(out)
        for name, p in self._on_disk:  # copies in the data dir, until the first assignment
            if p not in held:
                _add_lag(out, p, known.get((name, p)))
        return out

    def queue_send(self, part: TablePartition, items: list[tuple[bytes, bytes | None]]) -> None:
        """A partition's ChangelogSink: ``items`` is the partition's own new list (kept, not copied)."""
        self._sends.append((part, items))
        self.unsent_bytes += len(items) * _entry_bytes(part, items)
        if self.unsent_bytes > self.max_unsent_bytes and self.room.is_set():
            self._full()

    def _full(self) -> None:
        self.room.clear()
        log.debug("table writes waiting for the changelog hold about %d bytes: committing now", self.unsent_bytes)
        if self.on_full is not None:
            self.on_full()

    def _recount(self) -> None:
        """After a commit took the queued writes (or they were dropped): what is queued since."""
        self.unsent_bytes = float(sum(len(items) * _entry_bytes(part, items) for part, items in self._sends))
        if self.unsent_bytes <= self.max_unsent_bytes:
            self.room.set()
        else:  # written while the commit ran (the tasks' buffered records): the next commit, at once
            self._full()

    def dirty(self, writer: Any = None) -> bool:
        """Writes waiting for a commit (exactly_once: task ``writer``'s)."""
        if writer is None:
            return bool(self._sends) or any(p.dirty() for t in self.tables for p in self._held(t).values())
        return any(s[0].writer == writer for s in self._sends) or any(p.dirty() for p in self._parts(writer))

    def _parts(self, writer: Any) -> list[TablePartition]:
        """Every partition, or (exactly_once) those whose writes belong to task ``writer``."""
        parts = [p for t in self.tables for p in self._held(t).values()]
        return parts if writer is None else [p for p in parts if p.writer == writer]

    async def flush(self, writer: Any = None, producer: TaskSender | None = None) -> None:
        """Commit step 1: caches -> changelog records (sent; delivery awaited by the producer flush).

        exactly_once: only task ``writer``'s partitions, through its transactional ``producer``.
        """
        for part in self._parts(writer):
            part.flush_cache()
        if writer is None:
            sends, self._sends = self._sends, []
        else:
            sends = [s for s in self._sends if s[0].writer == writer]
            self._sends = [s for s in self._sends if s[0].writer != writer]
        if producer is None:
            producer = self.producer
        by_part: dict[TablePartition, list[list[tuple[bytes, bytes | None]]]] = {}
        for part, items in sends:
            by_part.setdefault(part, []).append(items)
        # One sender per partition, side by side: a partition's next batch waits until the
        # broker took its previous one, so partition after partition would add those waits up
        # (a 1M-key table's commit took 6 s). Each partition's records keep their order.
        senders = [asyncio.ensure_future(_send_changelog(producer, p, c)) for p, c in by_part.items()]
        try:
            await asyncio.gather(*senders)
        except BaseException:
            for sender in senders:
                sender.cancel()  # a cancelled hand-over fails its batch: the flush after raises
            await asyncio.gather(*senders, return_exceptions=True)
            raise

    def checkpoint(self, writer: Any = None) -> None:
        """Commit step 4 (after the producer flush and the offset commit): stores, then checkpoints.

        exactly_once: called for task ``writer`` after its transaction committed, so a store and
        its checkpoint only ever hold committed changelog values (see docs/guarantees.md).
        """
        for part in self._parts(writer):
            if part.active:
                try:
                    part.write_store()
                    part.checkpoint()
                except (StoreError, OSError) as exc:
                    raise self._unwritable(part.store.path, "write", exc) from exc
        self._recount()

    def _unwritable(self, path: Path, op: str, exc: BaseException) -> StoreUnavailable:
        """A read-only or full data dir: say which flag to fix, and that nothing is lost."""
        return StoreUnavailable(
            path,
            f"cannot {op} the store ({exc}). Fix: make the data dir {self.settings.data_dir} "
            "(--data-dir) writable and give it free space, then restart the worker; nothing is lost: offsets "
            "are committed only after the changelog has the values, and restore replays it",
        )

    def discard(self, writer: Any) -> None:
        """A failed commit (exactly_once: of task ``writer``; at_least_once: ``None``, every partition):
        back to the committed state; the changelog (restored on the next assignment) has the rest."""
        if writer is None:
            self._sends = []
        else:
            self._sends = [s for s in self._sends if s[0].writer != writer]
        for part in self._parts(writer):
            part.discard_uncommitted()
        self._recount()
