"""The ``kafka://`` consumer: AIOKafkaConsumer without auto-commit, errors as TransportError."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener  # type: ignore[import-untyped,unused-ignore]
from aiokafka import errors as kafka_errors  # type: ignore[import-untyped,unused-ignore]

from ...exceptions import CommitFailed, GroupFenced, TransportError
from ..base import TP, Assignor, Message, RebalanceListener
from .assignor import AssignorAdapter
from .config import CONSUMER_KEYS, describe, pick, started
from .conn_guard import install as install_conn_guard
from .fetch import as_message, raw_bytes
from .fetch import install as install_fetch_hook
from .follower_sync import MAX_WAIT_S as SYNC_WAIT_MAX_S
from .follower_sync import install as sync_after_leader
from .metadata_task import revive as revive_metadata_task
from .security import start_client

__all__ = ["KafkaConsumer"]


class _ListenerAdapter(ConsumerRebalanceListener):  # type: ignore[misc]
    """aiokafka awaits these; note it logs and swallows exceptions raised by the listener."""

    def __init__(self, listener: RebalanceListener, joined: Callable[[], None]) -> None:
        self.listener = listener
        self.joined = joined

    async def on_partitions_revoked(self, revoked: Iterable[TP]) -> None:
        await self.listener.on_partitions_revoked(set(revoked))

    async def on_partitions_assigned(self, assigned: Iterable[TP]) -> None:
        self.joined()
        await self.listener.on_partitions_assigned(set(assigned))


def _leave_group_at_generation_zero(consumer: Any) -> None:
    """Make a stopping member send LeaveGroup even when its group generation is 0.

    aiokafka only leaves when ``generation > 0`` (Kafka numbers generations from 1), but tansu
    hands out generation 0 to a fresh group's first members. Without this, such a member stays
    in the group after ``stop()`` and the next join stalls for a whole session timeout waiting
    for it. LeaveGroup carries no generation, so claiming 1 at close time is harmless.

    On Kafka, whose generations start at 1, it never acts (measured with the scale-out soak on a 3-broker
    cluster, issue 39: the same figures with and without it), so it needs no dev-broker check. A static
    member (``group_instance_id``) still sends no LeaveGroup: aiokafka's own check, which runs after this.
    """
    coordinator = getattr(consumer, "_coordinator", None)
    original = getattr(coordinator, "_maybe_leave_group", None)
    if coordinator is None or original is None:
        return

    async def maybe_leave_group() -> None:
        if coordinator.generation == 0 and coordinator.member_id:
            coordinator.generation = 1
        await original()

    coordinator._maybe_leave_group = maybe_leave_group


def _track_heartbeats(consumer: Any, confirmed: Callable[[float], None]) -> None:
    """Report the send time of every heartbeat the coordinator accepted.

    aiokafka keeps this to itself (a local of its heartbeat loop); the membership deadline needs
    it. The *send* time: the coordinator restarted the member's session no earlier than that.
    """
    coordinator = getattr(consumer, "_coordinator", None)
    original = getattr(coordinator, "_do_heartbeat", None)
    if coordinator is None or original is None:
        return

    async def do_heartbeat() -> bool:
        sent = time.monotonic()
        ok: bool = await original()
        if ok:
            confirmed(sent)
        return ok

    coordinator._do_heartbeat = do_heartbeat


class KafkaConsumer:
    """AIOKafkaConsumer without auto-commit; the worker commits explicitly after flushing.

    aiokafka needs a running loop to construct its client, so the consumer is built in
    :meth:`start`; ``subscribe``/``assign`` called before that are applied at start.
    Note: with a subscription, ``start()`` returns only once the first assignment arrived.
    """

    def __init__(
        self,
        bootstrap: list[str],
        group_id: str | None,
        assignor: Assignor | None,
        settings: Mapping[str, Any],
        security: Mapping[str, Any] | None = None,
    ) -> None:
        self._bootstrap = bootstrap
        self._security = dict(security or {})
        self.group_id = group_id
        self._config: dict[str, Any] = {"auto_offset_reset": "earliest"}
        self._config.update(pick(settings, CONSUMER_KEYS))
        self._read_committed = self._config.get("isolation_level") == "read_committed"
        self._assignor = AssignorAdapter(assignor) if assignor is not None else None
        self._consumer: Any = None
        self._convert = False  # aiokafka's records converted to Messages here (fetch hook not installed)
        self._subscription: tuple[list[str], _ListenerAdapter] | None = None
        self._manual: list[TP] | None = None
        self._session_s = float(self._config.get("session_timeout_ms", 10_000)) / 1000.0
        self._confirmed: float | None = None  # send time of the last request the coordinator answered

    async def start(self) -> None:
        if self._consumer is not None:
            return
        config = dict(self._config)
        if self._assignor is not None:
            config["partition_assignment_strategy"] = (self._assignor,)
        # records come as compiled Messages (transport/kafka/fetch.py), else getmany converts them
        self._convert = not install_fetch_hook()
        install_conn_guard()  # a request on a connection a dead broker reset fails as a connection error
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self._bootstrap,
            group_id=self.group_id,
            enable_auto_commit=False,
            key_deserializer=raw_bytes,  # marks this consumer for the hook; keys stay bytes
            **config,
            **self._security,
        )
        if self.group_id is not None:
            sync_after_leader(consumer, min(self._session_s, SYNC_WAIT_MAX_S))  # before start: the first join too
        if self._subscription is not None:
            topics, listener = self._subscription
            consumer.subscribe(topics, listener=listener)
        elif self._manual is not None:
            consumer.assign(self._manual)
        self._consumer = consumer
        try:
            await start_client(consumer.start, consumer.stop, self._security, "consumer", ",".join(self._bootstrap))
        except kafka_errors.KafkaError as exc:
            self._consumer = None
            await consumer.stop()
            raise TransportError(
                f"consumer (group {self.group_id!r}) could not start against {','.join(self._bootstrap)}: "
                f"{describe(exc)}. Fix: check the broker URL and that the broker is running"
            ) from exc
        _leave_group_at_generation_zero(consumer)
        _track_heartbeats(consumer, self._confirm)

    def _confirm(self, sent: float) -> None:
        if self._confirmed is None or sent > self._confirmed:
            self._confirmed = sent

    def _joined(self) -> None:
        # The SyncGroup answer just came: its send time was a round trip ago, which the
        # deadline's user allows for with its margin.
        self._confirm(time.monotonic())

    def membership_deadline(self) -> float | None:
        if self._consumer is None or self._subscription is None or self._confirmed is None:
            return None
        return self._confirmed + self._session_s

    async def stop(self) -> None:
        consumer, self._consumer = self._consumer, None
        self._confirmed = None
        if consumer is not None:
            await consumer.stop()

    def _require(self) -> Any:
        return started(self._consumer, "consumer")

    def subscribe(self, topics: Sequence[str], listener: RebalanceListener) -> None:
        if self.group_id is None:
            raise TransportError("subscribe() needs a consumer group; create the consumer with group_id=...")
        adapter = _ListenerAdapter(listener, self._joined)
        self._subscription, self._manual = (list(topics), adapter), None
        if self._consumer is not None:
            self._consumer.subscribe(list(topics), listener=adapter)

    def assign(self, partitions: Sequence[TP]) -> None:
        self._manual, self._subscription = list(partitions), None
        if self._consumer is not None:
            self._consumer.assign(list(partitions))

    def assignment(self) -> set[TP]:
        if self._consumer is None:
            return set(self._manual or ())
        return set(self._consumer.assignment())

    async def getmany(
        self, *partitions: TP, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[TP, list[Message]]:
        consumer = self._require()
        revive_metadata_task(getattr(consumer, "_client", None), self.group_id)
        try:
            batch: dict[TP, list[Message]] = await consumer.getmany(
                *partitions, timeout_ms=timeout_ms, max_records=max_records
            )
        except kafka_errors.NoOffsetForPartitionError as exc:
            tp: Any = exc.args[0] if exc.args else None
            where = f"{tp.topic}[{tp.partition}]" if hasattr(tp, "partition") else "a partition"
            raise TransportError(
                f"group {self.group_id!r} has no committed offset for {where} and "
                "consumer_auto_offset_reset='none' says not to guess one. Fix: commit a start offset for it "
                "(agentstream reset --offsets commits offset 0), or set consumer_auto_offset_reset to earliest or latest"
            ) from exc
        except kafka_errors.KafkaError as exc:
            raise TransportError(f"fetch failed (group {self.group_id!r}): {describe(exc)}") from exc
        if self._convert:
            return {tp: [as_message(r) for r in records] for tp, records in batch.items()}
        return batch

    def pause(self, *partitions: TP) -> None:
        try:
            self._require().pause(*partitions)
        except kafka_errors.KafkaError as exc:  # e.g. a partition not assigned (any more)
            raise TransportError(f"cannot pause {partitions}: {describe(exc)}") from exc

    def resume(self, *partitions: TP) -> None:
        try:
            self._require().resume(*partitions)
        except kafka_errors.KafkaError as exc:
            raise TransportError(f"cannot resume {partitions}: {describe(exc)}") from exc

    def seek(self, partition: TP, offset: int) -> None:
        try:
            self._require().seek(partition, offset)
        except (kafka_errors.KafkaError, ValueError) as exc:
            raise TransportError(f"cannot seek {partition} to {offset}: {describe(exc)}") from exc

    async def seek_to_beginning(self, *partitions: TP) -> None:
        try:
            await self._require().seek_to_beginning(*partitions)
        except kafka_errors.KafkaError as exc:
            raise TransportError(f"cannot seek to beginning of {partitions}: {describe(exc)}") from exc

    async def position(self, partition: TP) -> int:
        try:
            pos: int = await self._require().position(partition)
        except kafka_errors.KafkaError as exc:
            raise TransportError(f"no position for {partition}: {describe(exc)}") from exc
        return pos

    def request_rejoin(self) -> None:
        """aiokafka's coordinator rejoins the group at its next poll (as a metadata change would)."""
        consumer = self._consumer
        coordinator = getattr(consumer, "_coordinator", None) if consumer is not None else None
        if coordinator is not None:
            coordinator.request_rejoin()

    def highwater(self, partition: TP) -> int | None:
        consumer = self._consumer
        if consumer is None:
            return None
        try:
            # read_committed: the last stable offset is as far as this consumer will ever get.
            hw: int | None = (
                consumer.last_stable_offset(partition) if self._read_committed else consumer.highwater(partition)
            )
        except kafka_errors.KafkaError:
            return None  # not assigned
        return hw

    async def commit(self, offsets: Mapping[TP, int]) -> None:
        if not offsets:
            return
        sent = time.monotonic()
        try:
            await self._require().commit(dict(offsets))
            self._confirm(sent)  # the coordinator accepted this member's generation
        except (
            kafka_errors.CommitFailedError,
            kafka_errors.IllegalGenerationError,
            kafka_errors.UnknownMemberIdError,
            kafka_errors.RebalanceInProgressError,
        ) as exc:
            raise GroupFenced(
                f"commit of {len(offsets)} offsets failed because group {self.group_id!r} rebalanced "
                "(these partitions may now belong to another member); they will be re-processed"
            ) from exc
        except kafka_errors.IllegalOperation as exc:
            raise TransportError("commit() needs a consumer group; this consumer has group_id=None") from exc
        except kafka_errors.KafkaError as exc:
            raise CommitFailed(f"commit failed (group {self.group_id!r}): {describe(exc)}") from exc

    async def committed(self, partition: TP) -> int | None:
        try:
            offset: int | None = await self._require().committed(partition)
        except kafka_errors.IllegalOperation as exc:
            raise TransportError("committed() needs a consumer group; this consumer has group_id=None") from exc
        except kafka_errors.KafkaError as exc:
            raise TransportError(f"cannot read committed offset of {partition}: {describe(exc)}") from exc
        return offset
