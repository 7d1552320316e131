"""The table manager on its own: what an assignment, a revoke and the commit steps do to the
worker's table partitions (RocksDB stores in a temporary data dir, the changelog on ``memory://``).

Built from its collaborators as the worker builds it: the app's tables and settings, a consumer
factory, the started producer, the app's runtime (where table writes find the started manager) and
optional fault points.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

import agentstream
from agentstream.exceptions import TransportError
from agentstream.lifecycle import PartitionState
from agentstream.runtime import runtime_for
from agentstream.tables.manager import CHECKPOINT_FILE, TableManager
from agentstream.tables.partition import TableNotActive
from agentstream.tables.store import read_checkpoint
from agentstream.transport.base import TP
from agentstream.transport.memory import MemoryTransport
from agentstream.transport.partitioner import default_partition
from agentstream.worker.assignor import Assignment
from tests.support.waiting import until

PARTITIONS = 4


class MidRestore:
    """Fault points that run ``probe`` each time the restorer passes its ``mid_restore`` point."""

    def __init__(self, probe: Callable[[], None]) -> None:
        self.probe = probe
        self.hits = 0

    def check(self, point: str) -> None:
        if point == "mid_restore":
            self.hits += 1
            self.probe()


def key_in(partition: int, n: int = 0) -> str:
    """The ``n``-th key of the form ``k<i>`` that the default partitioner puts in ``partition``."""
    found = [k for k in (f"k{i}" for i in range(1000)) if default_partition(k.encode(), PARTITIONS) == partition]
    return found[n]


class Env:
    def __init__(self, tmp_path: Path) -> None:
        self.app = agentstream.App(
            f"tm{uuid.uuid4().hex[:6]}",
            broker=f"memory://tm-{uuid.uuid4().hex[:6]}",
            store="rocksdb://",
            data_dir=str(tmp_path),
            web_enabled=False,
            topic_partitions=PARTITIONS,
            commit_interval=0.05,
        )
        self.table = self.app.Table("counts", default=int)
        self.transport = self.app.transport
        assert isinstance(self.transport, MemoryTransport)
        self.changelog = self.table.changelog_topic.name
        self.managers: list[TableManager] = []

    async def manager(self, faults: MidRestore | None = None, wrap: Callable[[Any], Any] | None = None) -> TableManager:
        """A started manager (as the worker makes it, after the producer); ``wrap``, if given, wraps
        each of its consumers (a test double over the memory one)."""
        consumers = partial(self.transport.consumer, group_id=None)
        manager = TableManager(
            self.app.tables.values(),
            settings=self.app.settings,
            runtime=runtime_for(self.app),
            consumers=consumers if wrap is None else lambda **kw: wrap(consumers(**kw)),
            producer=await self.app.start_producer(),
            faults=faults,
        )
        await manager.start()
        self.managers.append(manager)
        return manager

    async def stop(self, manager: TableManager) -> None:
        self.managers.remove(manager)
        await manager.stop()

    async def write_changelog(self, partition: int, items: list[tuple[str, int | None]]) -> None:
        producer = await self.app.start_producer()
        for key, value in items:
            raw = None if value is None else self.table.value_codec.dumps(value)
            await producer.send(self.changelog, key.encode(), raw, partition=partition)

    def changelog_records(self, partition: int) -> list[tuple[bytes, Any]]:
        return [
            (m.key, None if m.value is None else self.table.value_codec.loads(m.value))
            for m in self.transport.read_topic(self.changelog)
            if m.partition == partition
        ]

    def checkpoint_path(self, partition: int) -> Path:
        return Path(self.app.settings.data_dir) / self.app.id / "tables" / "counts" / str(partition) / CHECKPOINT_FILE

    def state(self, partition: int) -> PartitionState:
        return self.table.parts[partition].state


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    e = Env(tmp_path)
    await e.transport.ensure_topics([e.table.changelog_topic.spec()])
    yield e
    for manager in list(e.managers):
        await manager.stop()
    await e.app.stop_clients()


async def commit(env: Env, manager: TableManager) -> None:
    """The table steps of an at_least_once commit, in the commit unit's order."""
    await manager.settle_callbacks()
    await manager.flush()
    await env.app.producer.flush()
    manager.checkpoint()


# -- assignment -------------------------------------------------------------------------------------


async def test_an_assignment_opens_active_partitions_for_writes_and_standbys_for_reads(env: Env) -> None:
    manager = await env.manager()
    await manager.on_assigned(Assignment(active=[0, 1, 9], standby=[2]))  # 9: the table has no such partition
    assert sorted(env.table.parts) == [0, 1, 2]
    assert env.state(0) is env.state(1) is PartitionState.ACTIVE
    assert env.state(2) is PartitionState.STANDBY
    env.table[key_in(0)] = 1
    env.table[key_in(1)] = 2
    with pytest.raises(TableNotActive, match="partition 2 is a standby"):
        env.table[key_in(2)] = 3
    assert env.table[key_in(0)] == 1


async def test_active_partitions_are_restored_from_the_changelog_before_the_assignment_returns(env: Env) -> None:
    a, b, gone = key_in(0, 0), key_in(0, 1), key_in(0, 2)
    await env.write_changelog(0, [(a, 1), (b, 5), (a, 2), (gone, 7), (gone, None)])
    await env.write_changelog(3, [(key_in(3), 4)])
    manager = await env.manager()
    await manager.on_assigned(Assignment(active=[0]))
    assert env.table[a] == 2 and env.table[b] == 5
    assert gone not in env.table
    assert manager.restored_records == 5  # partition 3 is not ours: not restored
    assert read_checkpoint(env.checkpoint_path(0)) == 5  # restore ends with a checkpoint


async def test_a_partition_takes_no_writes_while_it_restores(env: Env) -> None:
    a = key_in(0)
    await env.write_changelog(0, [(a, 1), (a, 2)])
    refused: list[tuple[PartitionState, str]] = []

    def write_now() -> None:
        try:
            env.table[a] = 100
        except TableNotActive as exc:
            refused.append((env.state(0), str(exc)))

    spy = MidRestore(write_now)
    manager = await env.manager(spy)
    await manager.on_assigned(Assignment(active=[0]))
    assert spy.hits >= 1
    assert refused and refused[0][0] is PartitionState.RESTORING
    assert env.table[a] == 2  # the write during restore did not land
    env.table[a] = 3  # restored: writes go through
    assert env.table[a] == 3


async def test_a_standby_follows_the_changelog(env: Env) -> None:
    a = key_in(2)
    manager = await env.manager()
    await manager.on_assigned(Assignment(active=[0], standby=[2]))
    await env.write_changelog(2, [(a, 41), (a, 42)])
    await until(lambda: env.table.get(a) == 42, "the standby caught up with the changelog")
    assert env.state(2) is PartitionState.STANDBY


class YieldingConsumer:
    """A memory consumer whose fetches yield to the event loop, as a network fetch does (the memory
    one answers without awaiting when records are there)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def getmany(self, *partitions: TP, **kw: Any) -> Any:
        await asyncio.sleep(0)
        return await self.inner.getmany(*partitions, **kw)


async def test_standbys_catch_up_only_once_the_active_partitions_are_restored(env: Env) -> None:
    """The tasks wait for the active restore; a standby (say a new one, with a whole changelog to
    read) does not. On the worker's one event loop, its catch-up would slow the restore: the
    standbys are followed from the restore's end on."""
    a, b = key_in(0), key_in(2)
    await env.write_changelog(0, [(a, i) for i in range(25_000)])  # three restore batches
    await env.write_changelog(2, [(b, i) for i in range(25_000)])
    seen: list[int | None] = []
    manager = await env.manager(MidRestore(lambda: seen.append(env.table.parts[2].changelog_offset)), YieldingConsumer)
    await manager.on_assigned(Assignment(active=[0], standby=[2]))
    assert len(seen) == 3 and all(offset in (None, 0) for offset in seen)  # no standby read during the restore
    await until(lambda: env.table.get(b) == 24_999, "the standby caught up after the restore")


async def test_a_manager_started_on_a_data_dir_reports_its_copies_until_the_first_assignment(env: Env) -> None:
    """What a restarted worker tells the group at its first join: the copies in its data dir, each
    behind by what the changelog gained since its checkpoint."""
    first = await env.manager()
    await first.on_assigned(Assignment(active=[0, 1]))
    env.table[key_in(0)] = 1
    env.table[key_in(1)] = 1
    await commit(env, first)
    await env.stop(first)
    await env.write_changelog(1, [(key_in(1), 2), (key_in(1), 3)])  # written while it was down

    restarted = await env.manager()
    assert restarted.lags() == {0: 0, 1: 2}
    await restarted.on_assigned(Assignment(active=[1]))
    assert restarted.lags() == {1: 0}  # partition 0's copy is no longer reported
    assert env.table[key_in(1)] == 3  # it restored the tail


class FailingFetches(YieldingConsumer):
    """A consumer whose fetches fail, as against a broker that went away."""

    async def getmany(self, *partitions: TP, **kw: Any) -> Any:
        raise TransportError("fetch failed: the broker went away")


async def test_copies_whose_changelog_end_cannot_be_learnt_report_an_unknown_lag(env: Env) -> None:
    """Unknown is not caught up: the plan then treats them as warm-up material, never as ready."""
    first = await env.manager()
    await first.on_assigned(Assignment(active=[0]))
    env.table[key_in(0)] = 1
    await commit(env, first)
    await env.stop(first)
    restarted = await env.manager(wrap=FailingFetches)  # started: the failed fetch does not stop the worker
    assert restarted.lags() == {0: None}


# -- revoke -------------------------------------------------------------------------------------------


async def test_revoke_suspends_active_partitions_and_the_next_assignment_closes_what_it_lacks(env: Env) -> None:
    manager = await env.manager()
    await manager.on_assigned(Assignment(active=[0, 1]))
    zero = env.table.parts[0]
    await manager.on_revoked()
    assert env.state(0) is env.state(1) is PartitionState.STANDBY
    with pytest.raises(TableNotActive):
        env.table[key_in(1)] = 1  # a revoked partition takes no writes
    await manager.on_assigned(Assignment(active=[1]))
    assert sorted(env.table.parts) == [1]
    assert zero.state is PartitionState.CLOSED
    assert env.state(1) is PartitionState.ACTIVE


async def test_revoke_after_a_failed_commit_drops_uncommitted_writes_and_the_partition_restores(env: Env) -> None:
    a = key_in(0)
    await env.write_changelog(0, [(a, 1)])
    manager = await env.manager()
    await manager.on_assigned(Assignment(active=[0]))
    env.table[a] = 5  # never committed: the commit failed
    await manager.on_revoked(dirty=True)
    assert not manager.dirty()
    assert env.table[a] == 1  # the standby shows the changelog's value, not the lost write
    await manager.on_assigned(Assignment(active=[0]))
    assert env.table[a] == 1


async def test_stop_closes_every_partition(env: Env) -> None:
    manager = await env.manager()
    await manager.on_assigned(Assignment(active=[0], standby=[1]))
    parts = dict(env.table.parts)
    await env.stop(manager)
    assert env.table.parts == {}
    assert all(p.state is PartitionState.CLOSED for p in parts.values())


# -- commit steps -----------------------------------------------------------------------------------------


async def test_a_commit_sends_the_changelog_then_writes_the_store_and_the_checkpoint(env: Env) -> None:
    a, b = key_in(0, 0), key_in(0, 1)
    manager = await env.manager()
    await manager.on_assigned(Assignment(active=[0]))
    env.table[a] = 1
    env.table[b] = 2
    env.table[a] = 3
    assert manager.dirty()
    assert env.changelog_records(0) == []  # writes wait in the cache until the commit
    assert not env.checkpoint_path(0).exists()
    part = env.table.parts[0]
    await manager.flush()
    assert sorted(env.changelog_records(0)) == sorted([(a.encode(), 3), (b.encode(), 2)])
    assert part.store.get(a.encode()) is None  # the store only takes values after the producer flush
    await env.app.producer.flush()
    manager.checkpoint()
    assert part.store.get(a.encode()) == env.table.value_codec.dumps(3)
    assert read_checkpoint(env.checkpoint_path(0)) == 2  # the changelog offset the store is consistent with
    assert not manager.dirty()


async def test_after_a_restart_only_the_changelog_past_the_checkpoint_is_replayed(env: Env) -> None:
    a, b = key_in(0, 0), key_in(0, 1)
    manager = await env.manager()
    await manager.on_assigned(Assignment(active=[0]))
    env.table[a] = 1
    env.table[b] = 2
    await commit(env, manager)
    await env.stop(manager)
    await env.write_changelog(0, [(a, 10)])  # written after our checkpoint (another owner, say)
    manager = await env.manager()
    await manager.on_assigned(Assignment(active=[0]))
    assert manager.restored_records == 1
    assert env.table[a] == 10 and env.table[b] == 2


async def test_discard_after_a_failed_commit_leaves_the_committed_values(env: Env) -> None:
    a = key_in(0)
    manager = await env.manager()
    await manager.on_assigned(Assignment(active=[0]))
    env.table[a] = 1
    await commit(env, manager)
    env.table[a] = 2
    await manager.flush()  # sent, but the producer flush failed: the commit is abandoned
    manager.discard(None)
    assert not manager.dirty()
    assert env.table[a] == 1
    manager.checkpoint()
    assert read_checkpoint(env.checkpoint_path(0)) == 1  # not past what the store holds


async def test_a_store_without_its_checkpoint_is_wiped_and_restored_from_scratch(env: Env) -> None:
    a = key_in(0)
    manager = await env.manager()
    await manager.on_assigned(Assignment(active=[0]))
    env.table[a] = 1
    await commit(env, manager)
    await env.stop(manager)
    env.checkpoint_path(0).unlink()  # the store without its checkpoint cannot be trusted
    manager = await env.manager()
    await manager.on_assigned(Assignment(active=[0]))
    assert manager.restored_records == 1  # wiped and replayed from the start
    assert env.table[a] == 1


async def test_changelog_records_of_a_partition_go_to_that_changelog_partition(env: Env) -> None:
    manager = await env.manager()
    await manager.on_assigned(Assignment(active=[0, 3]))
    env.table[key_in(0)] = 1
    env.table[key_in(3)] = 2
    await commit(env, manager)
    assert env.changelog_records(0) == [(key_in(0).encode(), 1)]
    assert env.changelog_records(3) == [(key_in(3).encode(), 2)]
    assert env.transport.end_offsets([TP(env.changelog, 1), TP(env.changelog, 2)]) == {
        TP(env.changelog, 1): 0,
        TP(env.changelog, 2): 0,
    }


# -- global tables ---------------------------------------------------------------------------------------


async def test_global_tables_are_restored_whole_at_start_and_followed_through_rebalances(env: Env) -> None:
    glob = env.app.GlobalTable("config", default=int)
    await env.transport.ensure_topics([glob.changelog_topic.spec()])
    producer = await env.app.start_producer()
    for p in range(PARTITIONS):
        await producer.send(glob.changelog_topic.name, key_in(p).encode(), glob.value_codec.dumps(p), partition=p)
    manager = await env.manager()
    assert sorted(glob.parts) == list(range(PARTITIONS))  # every partition, before any assignment
    assert all(part.state is PartitionState.ACTIVE for part in glob.parts.values())
    assert [glob[key_in(p)] for p in range(PARTITIONS)] == list(range(PARTITIONS))
    await manager.on_assigned(Assignment(active=[0]))
    await manager.on_revoked()
    assert all(part.state is PartitionState.ACTIVE for part in glob.parts.values())  # not suspended
    await manager.on_assigned(Assignment(active=[1]))
    await producer.send(glob.changelog_topic.name, key_in(3).encode(), glob.value_codec.dumps(33), partition=3)
    await until(lambda: glob[key_in(3)] == 33, "the global table follows its changelog")


# -- registration ----------------------------------------------------------------------------------------


async def test_table_writes_reach_the_manager_only_between_its_start_and_its_stop(env: Env) -> None:
    runtime = runtime_for(env.app)
    assert runtime.tables is None
    manager = await env.manager()
    assert runtime.tables is manager  # started: table writes queue their changelog records with it
    await manager.on_assigned(Assignment(active=[0]))
    env.table[key_in(0)] = 1
    await commit(env, manager)
    assert env.changelog_records(0) == [(key_in(0).encode(), 1)]
    await env.stop(manager)
    assert runtime.tables is None  # a stopped manager takes nothing more


async def test_the_restore_reader_asks_for_short_fetch_waits_and_the_standby_reader_for_the_workers(
    tmp_path: Path,
) -> None:
    """A restore learns where an empty changelog ends from an empty fetch, which the broker holds
    for the fetch wait while the tasks wait for the restore: the restore reader asks for a short
    one. The standby reader, idle most of the time, keeps the worker's consumer_fetch_max_wait."""
    from agentstream.tables.manager import RESTORE_FETCH_MAX_WAIT_MS

    env = Env(tmp_path)
    asked: list[dict[str, Any]] = []

    def consumers(**settings: Any) -> Any:
        asked.append(settings)
        return env.transport.consumer(group_id=None, **{**env.app.consumer_settings(), **settings})

    manager = TableManager(
        env.app.tables.values(),
        settings=env.app.settings,
        runtime=runtime_for(env.app),
        consumers=consumers,
        producer=await env.app.start_producer(),
    )
    await manager.start()
    try:
        restore, standby = asked
        assert (
            restore["fetch_max_wait_ms"] == RESTORE_FETCH_MAX_WAIT_MS < env.app.consumer_settings()["fetch_max_wait_ms"]
        )
        assert "fetch_max_wait_ms" not in standby  # the app's own
    finally:
        await manager.stop()
        await env.app.stop_clients()


# -- memory budget ---------------------------------------------------------------------------------------


async def test_every_store_of_the_worker_shares_the_rocksdb_memory_budget(env: Env) -> None:
    """Active, standby and global table partitions alike: one block cache of rocksdb_memory_mb."""
    env.app.settings.rocksdb_memory_mb = 40
    glob = env.app.GlobalTable("config-mem", default=int)
    await env.transport.ensure_topics([glob.changelog_topic.spec()])
    manager = await env.manager()
    await manager.on_assigned(Assignment(active=[0], standby=[1]))
    parts = [env.table.parts[0], env.table.parts[1], *glob.parts.values()]
    assert len(parts) == 2 + PARTITIONS
    assert {part.store.property_int("rocksdb.block-cache-capacity") for part in parts} == {40 << 20}  # type: ignore[attr-defined]
    assert len({id(part.store.memory) for part in parts}) == 1  # type: ignore[attr-defined]


async def test_commits_checkpoint_the_store_at_most_every_checkpoint_interval(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkpoint flushes RocksDB's memtables to a new SST file: commits seconds apart must not
    each make one (many small level-0 files, merged again and again into level 1), so past the
    first, a commit checkpoints only once CHECKPOINT_MIN_INTERVAL has passed since the last."""
    from agentstream.tables import partition as partition_module

    monkeypatch.setattr(partition_module, "CHECKPOINT_DELTA", 1)  # every commit moves the store enough
    a = key_in(0)
    manager = await env.manager()
    await manager.on_assigned(Assignment(active=[0]))
    env.table[a] = 1
    await commit(env, manager)
    first = read_checkpoint(env.checkpoint_path(0))
    env.table[a] = 2
    await commit(env, manager)
    env.table[a] = 3
    await commit(env, manager)
    assert read_checkpoint(env.checkpoint_path(0)) == first  # within the interval: no flush, no checkpoint
    monkeypatch.setattr(partition_module, "CHECKPOINT_MIN_INTERVAL", 0.0)
    env.table[a] = 4
    await commit(env, manager)
    assert read_checkpoint(env.checkpoint_path(0)) == first + 3  # the interval passed: the store caught up
    await env.stop(manager)
