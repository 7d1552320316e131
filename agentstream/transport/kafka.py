"""``kafka://`` transport: thin adapters from :mod:`agentstream.transport.base` to aiokafka.

Kept thin on purpose: the worker's hot path (``getmany``, ``send``) calls straight into aiokafka;
only errors are translated into :class:`~agentstream.exceptions.TransportError` so callers
catch one exception tree.

Broker notes (tansu dev broker, see :mod:`agentstream.devbroker`): no idempotent/transactional
producer, and ListOffsets(latest) is wrong there, so partition ends come from fetch responses
(:meth:`KafkaConsumer.highwater`), never from ``end_offsets``.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any, Iterable, Mapping, Sequence
from urllib.parse import urlsplit

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener  # type: ignore[import-untyped,unused-ignore]
from aiokafka import errors as kafka_errors  # type: ignore[import-untyped,unused-ignore]
from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # type: ignore[import-untyped,unused-ignore]
from aiokafka.coordinator.protocol import (  # type: ignore[import-untyped,unused-ignore]
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)

from ..exceptions import (
    CommitFailed,
    ConfigError,
    PartitionCountMismatch,
    ProducerError,
    ProducerFenced,
    TransactionsUnsupported,
    TransportError,
)
from .base import TP, Assignor, Delivery, MemberInfo, Message, RebalanceListener, TopicSpec
from .kafka_batches import OpenBatch, RecordDelivery
from .partitioner import default_partition
from .kafka_security import start_client

__all__ = ["KafkaTransport", "KafkaProducer", "KafkaConsumer", "AssignorAdapter", "parse_kafka_url"]

_URL_FIX = "use kafka://host:port, several brokers separated by ';' or ',' (e.g. kafka://127.0.0.1:9092)"
DEFAULT_PORT = 9092

_PRODUCER_KEYS = frozenset(
    {
        "client_id",
        "acks",
        "linger_ms",
        "max_batch_size",
        "max_request_size",
        "compression_type",
        "request_timeout_ms",
        "retry_backoff_ms",
        "metadata_max_age_ms",
        "connections_max_idle_ms",
        "send_backoff_ms",
        "transactional_id",
        "transaction_timeout_ms",
    }
)
_CONSUMER_KEYS = frozenset(
    {
        "client_id",
        "auto_offset_reset",
        "session_timeout_ms",
        "heartbeat_interval_ms",
        "rebalance_timeout_ms",
        "max_poll_interval_ms",
        "fetch_max_wait_ms",
        "fetch_min_bytes",
        "fetch_max_bytes",
        "max_partition_fetch_bytes",
        "max_poll_records",
        "isolation_level",
        "request_timeout_ms",
        "retry_backoff_ms",
        "metadata_max_age_ms",
        "connections_max_idle_ms",
        "consumer_timeout_ms",
        "group_instance_id",
    }
)


def parse_kafka_url(url: str) -> list[str]:
    """``kafka://h1:p1;h2:p2`` (or ``,``-separated) -> ``["h1:p1", "h2:p2"]``; port defaults to 9092."""
    if not isinstance(url, str) or "://" not in url:
        raise ConfigError("broker", f"{url!r} is not a broker URL", _URL_FIX)
    scheme, _, rest = url.partition("://")
    if scheme.lower() != "kafka":
        raise ConfigError("broker", f"{url!r} does not use the kafka:// scheme", _URL_FIX)
    rest = rest.rstrip("/")
    if not rest or "/" in rest or "?" in rest or "#" in rest or "@" in rest:
        raise ConfigError("broker", f"{url!r} must list only host:port pairs", _URL_FIX)
    hosts: list[str] = []
    for part in rest.replace(",", ";").split(";"):
        part = part.strip()
        if not part:
            continue
        try:
            split = urlsplit(f"//{part}")
            host, port = split.hostname, split.port
        except ValueError as exc:
            raise ConfigError("broker", f"bad host:port {part!r} in {url!r} ({exc})", _URL_FIX) from exc
        if not host:
            raise ConfigError("broker", f"missing host in {part!r} of {url!r}", _URL_FIX)
        if ":" in host:  # IPv6 literal
            host = f"[{host}]"
        hosts.append(f"{host}:{port if port is not None else DEFAULT_PORT}")
    if not hosts:
        raise ConfigError("broker", f"{url!r} names no broker host", _URL_FIX)
    return hosts


def _pick(settings: Mapping[str, Any], keys: frozenset[str]) -> dict[str, Any]:
    """Only the settings aiokafka understands for this client; None means 'aiokafka default'."""
    return {k: v for k, v in settings.items() if k in keys and v is not None}


def _describe(exc: BaseException) -> str:
    text, kind = str(exc), type(exc).__name__
    return text if text.startswith(kind) else f"{kind}: {text}" if text else kind


# -- producer -------------------------------------------------------------------------------------


_PARTITION_CACHE_SIZE = 100_000
_NO_HEADERS: list[tuple[str, bytes]] = []  # read-only: the batch builder only iterates it


class KafkaProducer:
    """AIOKafkaProducer with acks=all, framework-side batch filling, and flush() that reports failures.

    Records are appended to one open batch per partition (:mod:`.kafka_batches`). A batch is
    handed to aiokafka as soon as it is opened, and filled until aiokafka's sender takes it or it
    is full, exactly like ``AIOKafkaProducer.send`` fills its batches, so ``linger_ms`` and
    ``max_batch_size`` keep their meaning.

    Failures are sticky: the first batch that fails, is cancelled or could not be queued is
    dropped from the open batches at once (nothing is appended to a dead batch) and remembered;
    every later ``flush()`` raises it until the producer is stopped (or, for a transactional
    producer, the transaction is aborted, which discards the failed records with it). A commit
    that follows any flush can therefore never pass an undelivered record.
    """

    def __init__(self, bootstrap: list[str], settings: Mapping[str, Any],
                 security: Mapping[str, Any] | None = None) -> None:
        self._bootstrap = bootstrap
        self._config: dict[str, Any] = {"acks": "all", "linger_ms": 5}
        self._config.update(_pick(settings, _PRODUCER_KEYS))
        self._security = dict(security or {})
        self._producer: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._partition_cache: dict[str, dict[bytes, int]] = {}
        self._partition_count: dict[str, int] = {}
        self._sticky: dict[str, int] = {}  # keyless records: one partition per batch, then the next
        self._open: dict[str, dict[int, OpenBatch]] = {}
        # topic -> (partition count, key -> partition memo, open batches): the same objects as above
        self._routes: dict[str, tuple[int, dict[bytes, int], dict[int, OpenBatch]]] = {}
        self._handover_locks: dict[str, list[asyncio.Lock]] = {}
        self._sent: list[OpenBatch] = []  # handed to aiokafka since the last flush
        self._failure: tuple[str, BaseException] | None = None  # (message, cause): raised by every flush
        self._generation = 0  # +1 at stop and abort: failures of older batches no longer count
        self._request_timeout_s = float(self._config.get("request_timeout_ms", 40_000)) / 1000.0
        self.transactional_id: str | None = self._config.get("transactional_id")

    async def start(self) -> None:
        if self._producer is not None:
            return
        producer = AIOKafkaProducer(bootstrap_servers=self._bootstrap, **self._config, **self._security)
        try:
            await start_client(producer.start, producer.stop, self._security, "producer", ",".join(self._bootstrap))
        except kafka_errors.KafkaError as exc:
            await producer.stop()
            if self.transactional_id is not None and not isinstance(exc, kafka_errors.KafkaConnectionError):
                # InitProducerId failed: the broker has no transaction coordinator (tansu answers
                # UnknownError at once). Say which setting needs it instead of degrading silently.
                raise TransactionsUnsupported(
                    ",".join(self._bootstrap), f"InitProducerId for {self.transactional_id!r}: {_describe(exc)}"
                ) from exc
            raise TransportError(
                f"producer could not connect to {','.join(self._bootstrap)}: {_describe(exc)}. "
                "Fix: check the broker URL and that the broker is running"
            ) from exc
        self._producer = producer
        self._loop = asyncio.get_running_loop()

    async def stop(self) -> None:
        producer, self._producer = self._producer, None
        self._reset()
        if producer is not None:
            await producer.stop()

    def _reset(self) -> None:
        """Forget open batches and the remembered failure: a new generation of batches starts."""
        self._generation += 1
        for batches in self._open.values():
            batches.clear()
        self._sent = []
        self._failure = None

    def _batch_failed(self, batch: OpenBatch, error: BaseException) -> None:
        """Called by a batch the moment it fails: never append to it again, and remember why."""
        open_batches = self._open.get(batch.topic)
        if open_batches is not None and open_batches.get(batch.partition) is batch:
            del open_batches[batch.partition]
        if batch.generation != self._generation or self._failure is not None:
            return
        if isinstance(error, ProducerError):
            self._failure = (str(error), error)
        else:
            what = "was cancelled" if isinstance(error, asyncio.CancelledError) else "failed"
            self._failure = (f"delivery to {batch.topic}[{batch.partition}] {what}: "
                             f"{_describe(error).rstrip('.')}; offsets past it must not be committed", error)

    def _require(self) -> Any:
        if self._producer is None:
            raise TransportError("producer is not started; call await producer.start() first")
        return self._producer

    async def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        *,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Sequence[tuple[str, bytes]] | None = None,
    ) -> Delivery:
        route = self._routes.get(topic)  # one lookup per record for all the per-topic state
        if route is None:
            await self._learn_topic(topic)
            route = self._routes[topic]
        count, memo, open_batches = route
        if partition is None:
            if key is not None:
                partition = memo.get(key)
                if partition is None:
                    partition = self._hash_partition(topic, key, count)
            else:
                partition = self._sticky.get(topic)
                if partition is None:
                    partition = self._sticky[topic] = random.randrange(count)
        elif not 0 <= partition < count:
            raise ProducerError(f"could not send to {topic}[{partition}]: the topic has partitions 0..{count - 1}")
        hdrs = list(headers) if headers else _NO_HEADERS
        batch = open_batches.get(partition)
        if batch is not None:
            meta = batch.builder.append(timestamp=timestamp_ms, key=key, value=value, headers=hdrs)
            if meta is not None:
                return RecordDelivery(batch, meta)
        # No open batch, or it is full or already taken by the sender: open the next one.
        batch = self._new_batch(topic, partition)
        meta = batch.builder.append(timestamp=timestamp_ms, key=key, value=value, headers=hdrs)  # a first record always fits
        await self._hand_over(batch)
        return RecordDelivery(batch, meta)

    def send_now(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Sequence[tuple[str, bytes]] | None = None,
    ) -> Delivery | None:
        """:meth:`send`'s common case without a coroutine: a keyed (or explicitly placed) record
        whose partition's open batch has room. None: nothing was appended, call :meth:`send`
        (first send to the topic, keyless, no open batch or a full one). ``Topic.send_raw`` tries this first: one coroutine less per record."""
        route = self._routes.get(topic)
        if route is None:
            return None
        count, memo, open_batches = route
        if partition is None:
            if key is None:
                return None
            partition = memo.get(key)
            if partition is None:  # a new key: hash it here (distinct keys must not pay send() as well)
                partition = self._hash_partition(topic, key, count)
        elif not 0 <= partition < count:
            return None  # send() raises the error
        batch = open_batches.get(partition)
        if batch is None:
            return None
        meta = batch.builder.append(timestamp=timestamp_ms, key=key, value=value,
                                    headers=list(headers) if headers else _NO_HEADERS)
        if meta is None:
            return None
        return RecordDelivery(batch, meta)

    async def _learn_topic(self, topic: str) -> int:
        """First send to a topic: wait for its metadata once; later sends never await it."""
        producer = self._require()
        try:
            partitions = await producer.partitions_for(topic)
        except kafka_errors.KafkaError as exc:
            raise ProducerError(f"could not send to {topic}: no metadata ({_describe(exc)})") from exc
        count = len(partitions)
        self._partition_cache.setdefault(topic, {})
        self._open.setdefault(topic, {})
        self._handover_locks.setdefault(topic, [asyncio.Lock() for _ in range(count)])
        self._partition_count[topic] = count
        self._routes[topic] = (count, self._partition_cache[topic], self._open[topic])
        return count

    def _hash_partition(self, topic: str, key: bytes, count: int) -> int:
        """Kafka's default partitioner for keyed records, memoised per key.

        aiokafka computes murmur2 in pure Python; keys repeat (words, customer ids), so remembering
        key -> partition removes a large share of a stateful pipeline's CPU. Same result as the
        Java client: toPositive(murmur2) % n.
        """
        cache = self._partition_cache[topic]
        if len(cache) >= _PARTITION_CACHE_SIZE:
            cache.clear()
        partition = cache[key] = default_partition(key, count)
        return partition

    def _new_batch(self, topic: str, partition: int) -> OpenBatch:
        assert self._loop is not None
        batch = self._open[topic][partition] = OpenBatch(topic, partition, self._require().create_batch(), self._loop,
                                                         self._batch_failed, self._generation)
        if partition == self._sticky.get(topic):  # sticky partitioner (KIP-480): a new batch, the next partition
            self._sticky[topic] = (partition + 1) % self._partition_count[topic]
        return batch

    async def _hand_over(self, batch: OpenBatch) -> None:
        """Queue an open batch in aiokafka's accumulator; it goes on filling until the sender takes it.

        ``send_batch`` waits while the partition's previous batch is still queued: the same
        back-pressure ``AIOKafkaProducer.send`` applies to a producer faster than the broker.
        """
        self._sent.append(batch)
        producer = self._producer
        deadline = time.monotonic() + self._request_timeout_s
        try:
            # One hand-over at a time per partition, in the order the batches were opened: the
            # lock is FIFO, and nothing awaits between opening a batch and queueing for the lock.
            # Without it, tasks sending to one partition can overtake each other in send_batch.
            async with self._handover_locks[batch.topic][batch.partition]:
                while True:
                    try:
                        fut = await producer.send_batch(batch.builder, batch.topic, partition=batch.partition)
                        break
                    except kafka_errors.KafkaTimeoutError:
                        # aiokafka's add_batch subtracts the time since its *first* wait on every
                        # wait, so it can give up early: keep the real deadline (request_timeout_ms).
                        if time.monotonic() >= deadline:
                            raise
        except asyncio.CancelledError:
            # Never queued: its records (this one and any appended while it waited) will never
            # reach the broker. Failing it drops it from the open batches and makes every later
            # flush() raise, so no commit passes them.
            batch.fail(ProducerError(f"send to {batch.topic}[{batch.partition}] was cancelled before its batch "
                                     "was queued; its records were not delivered"))
            raise
        except (kafka_errors.KafkaError, kafka_errors.IllegalOperation, AssertionError) as exc:
            error = ProducerError(f"could not send to {batch.topic}[{batch.partition}]: {_describe(exc)}")
            batch.fail(error)
            raise error from exc
        batch.track(fut)

    async def flush(self) -> None:
        """Wait for every batch handed over so far; raise the producer's failure if it has one.

        The failure is raised by *every* flush until :meth:`stop` (or an aborted transaction):
        handing it over once would let the next commit pass the lost records.
        """
        producer = self._require()
        waiting, self._sent = self._sent, []
        try:
            await producer.flush()
        except kafka_errors.KafkaError as exc:
            raise ProducerError(f"flush failed: {_describe(exc)}") from exc
        unresolved = [b.delivered for b in waiting if not b.delivered.done()]
        if unresolved:
            await asyncio.wait(unresolved)
        self._raise_failure()

    def _raise_failure(self) -> None:
        """Raise ProducerError if a batch of this producer failed since it started (or last aborted)."""
        if self._failure is not None:
            message, cause = self._failure
            raise ProducerError(message) from cause

    async def partitions_for(self, topic: str) -> int:
        producer = self._require()
        try:
            partitions = await producer.partitions_for(topic)
        except kafka_errors.KafkaError as exc:
            raise TransportError(f"no metadata for topic {topic!r}: {_describe(exc)}") from exc
        return len(partitions)

    # -- transactions ----------------------------------------------------------------------------
    async def _txn(self, what: str, call: Any) -> None:
        try:
            await call
        except (kafka_errors.ProducerFenced, kafka_errors.InvalidProducerEpoch) as exc:
            raise ProducerFenced(
                f"producer {self.transactional_id!r} was fenced during {what}: a newer owner of the task exists"
            ) from exc
        except (kafka_errors.KafkaError, ValueError) as exc:
            raise ProducerError(f"{what} failed for producer {self.transactional_id!r}: {_describe(exc)}") from exc

    async def begin_transaction(self) -> None:
        await self._txn("begin_transaction", self._require().begin_transaction())

    async def send_offsets_to_transaction(self, offsets: Mapping[TP, int], group_id: str) -> None:
        if offsets:
            await self._txn("send_offsets_to_transaction",
                            self._require().send_offsets_to_transaction(dict(offsets), group_id))

    async def commit_transaction(self) -> None:
        await self._txn("commit_transaction", self._require().commit_transaction())

    async def abort_transaction(self) -> None:
        # Aborted with the transaction (failed records included): later records start new batches,
        # and once the abort succeeded, a failure of its batches no longer fails flushes.
        failure = self._failure
        self._reset()
        self._failure = failure
        await self._txn("abort_transaction", self._require().abort_transaction())
        self._failure = None


# -- assignor & listener adapters ------------------------------------------------------------------


class AssignorAdapter:
    """Presents a base.Assignor as an aiokafka partition assignor.

    aiokafka only calls ``name``, ``metadata``, ``assign`` and ``on_assignment`` on the objects in
    ``partition_assignment_strategy``, so an instance (not a class) carrying our assignor works.
    """

    version = 0

    def __init__(self, assignor: Assignor) -> None:
        self.assignor = assignor
        self.name: str = assignor.name

    def metadata(self, topics: Iterable[str]) -> Any:
        return ConsumerProtocolMemberMetadata(self.version, sorted(topics), self.assignor.member_user_data())

    def assign(self, cluster: Any, member_metadata: Mapping[str, Any]) -> dict[str, Any]:
        topics = sorted({t for meta in member_metadata.values() for t in meta.subscription})
        partitions_per_topic: dict[str, int] = {}
        for topic in topics:
            parts = cluster.partitions_for_topic(topic)
            if parts:
                partitions_per_topic[topic] = len(parts)
        members = [
            MemberInfo(member_id, frozenset(meta.subscription), bytes(meta.user_data or b""))
            for member_id, meta in sorted(member_metadata.items())
        ]
        result = self.assignor.assign(partitions_per_topic, members)
        out: dict[str, Any] = {}
        for member in members:
            tps, user_data = result.get(member.member_id, ([], b""))
            by_topic: dict[str, list[int]] = {}
            for tp in tps:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            out[member.member_id] = ConsumerProtocolMemberAssignment(
                self.version, sorted((t, sorted(p)) for t, p in by_topic.items()), user_data
            )
        return out

    def on_assignment(self, assignment: Any) -> None:
        self.assignor.on_assignment(list(assignment.partitions()), bytes(assignment.user_data or b""))


class _ListenerAdapter(ConsumerRebalanceListener):  # type: ignore[misc]
    """aiokafka awaits these; note it logs and swallows exceptions raised by the listener."""

    def __init__(self, listener: RebalanceListener) -> None:
        self.listener = listener

    async def on_partitions_revoked(self, revoked: Iterable[TP]) -> None:
        await self.listener.on_partitions_revoked(set(revoked))

    async def on_partitions_assigned(self, assigned: Iterable[TP]) -> None:
        await self.listener.on_partitions_assigned(set(assigned))


# -- consumer ---------------------------------------------------------------------------------------


def _leave_group_at_generation_zero(consumer: Any) -> None:
    """Make a stopping member send LeaveGroup even when its group generation is 0.

    aiokafka only leaves when ``generation > 0`` (Kafka numbers generations from 1), but tansu
    hands out generation 0 to a fresh group's first members. Without this, such a member stays
    in the group after ``stop()`` and the next join stalls for a whole session timeout waiting
    for it. LeaveGroup carries no generation, so claiming 1 at close time is harmless.
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
        self._config.update(_pick(settings, _CONSUMER_KEYS))
        self._read_committed = self._config.get("isolation_level") == "read_committed"
        self._assignor = AssignorAdapter(assignor) if assignor is not None else None
        self._consumer: Any = None
        self._subscription: tuple[list[str], _ListenerAdapter] | None = None
        self._manual: list[TP] | None = None

    async def start(self) -> None:
        if self._consumer is not None:
            return
        config = dict(self._config)
        if self._assignor is not None:
            config["partition_assignment_strategy"] = (self._assignor,)
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self._bootstrap, group_id=self.group_id, enable_auto_commit=False, **config,
            **self._security,
        )
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
                f"{_describe(exc)}. Fix: check the broker URL and that the broker is running"
            ) from exc
        _leave_group_at_generation_zero(consumer)

    async def stop(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            await consumer.stop()

    def _require(self) -> Any:
        if self._consumer is None:
            raise TransportError("consumer is not started; call await consumer.start() first")
        return self._consumer

    def subscribe(self, topics: Sequence[str], listener: RebalanceListener) -> None:
        if self.group_id is None:
            raise TransportError("subscribe() needs a consumer group; create the consumer with group_id=...")
        adapter = _ListenerAdapter(listener)
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
        try:
            batch: dict[TP, list[Message]] = await self._require().getmany(
                *partitions, timeout_ms=timeout_ms, max_records=max_records
            )
        except kafka_errors.KafkaError as exc:
            raise TransportError(f"fetch failed (group {self.group_id!r}): {_describe(exc)}") from exc
        return batch

    def pause(self, *partitions: TP) -> None:
        self._require().pause(*partitions)

    def resume(self, *partitions: TP) -> None:
        self._require().resume(*partitions)

    def seek(self, partition: TP, offset: int) -> None:
        try:
            self._require().seek(partition, offset)
        except (kafka_errors.KafkaError, ValueError) as exc:
            raise TransportError(f"cannot seek {partition} to {offset}: {_describe(exc)}") from exc

    async def seek_to_beginning(self, *partitions: TP) -> None:
        try:
            await self._require().seek_to_beginning(*partitions)
        except kafka_errors.KafkaError as exc:
            raise TransportError(f"cannot seek to beginning of {partitions}: {_describe(exc)}") from exc

    async def position(self, partition: TP) -> int:
        try:
            pos: int = await self._require().position(partition)
        except kafka_errors.KafkaError as exc:
            raise TransportError(f"no position for {partition}: {_describe(exc)}") from exc
        return pos

    def highwater(self, partition: TP) -> int | None:
        consumer = self._consumer
        if consumer is None:
            return None
        try:
            # read_committed: the last stable offset is as far as this consumer will ever get.
            hw: int | None = (consumer.last_stable_offset(partition) if self._read_committed
                              else consumer.highwater(partition))
        except kafka_errors.KafkaError:
            return None  # not assigned
        return hw

    async def commit(self, offsets: Mapping[TP, int]) -> None:
        if not offsets:
            return
        try:
            await self._require().commit(dict(offsets))
        except kafka_errors.CommitFailedError as exc:
            raise CommitFailed(
                f"commit of {len(offsets)} offsets failed because group {self.group_id!r} rebalanced "
                "(these partitions may now belong to another member); they will be re-processed"
            ) from exc
        except kafka_errors.IllegalOperation as exc:
            raise TransportError("commit() needs a consumer group; this consumer has group_id=None") from exc
        except kafka_errors.KafkaError as exc:
            raise CommitFailed(f"commit failed (group {self.group_id!r}): {_describe(exc)}") from exc

    async def committed(self, partition: TP) -> int | None:
        try:
            offset: int | None = await self._require().committed(partition)
        except kafka_errors.IllegalOperation as exc:
            raise TransportError("committed() needs a consumer group; this consumer has group_id=None") from exc
        except kafka_errors.KafkaError as exc:
            raise TransportError(f"cannot read committed offset of {partition}: {_describe(exc)}") from exc
        return offset


# -- transport ----------------------------------------------------------------------------------------


class KafkaTransport:
    """Producers, consumers and topic admin for one ``kafka://`` URL."""

    def __init__(self, url: str, *, request_timeout_ms: int = 30000, security: Mapping[str, Any] | None = None) -> None:
        self.url = url
        self.security = dict(security or {})  # aiokafka TLS/SASL arguments (kafka_security)
        self.bootstrap: list[str] = parse_kafka_url(url)
        self._request_timeout_ms = request_timeout_ms
        self._admin: Any = None
        self._admin_lock: asyncio.Lock | None = None

    def producer(self, **settings: Any) -> KafkaProducer:
        return KafkaProducer(self.bootstrap, settings, self.security)

    def consumer(self, *, group_id: str | None, assignor: Assignor | None = None, **settings: Any) -> KafkaConsumer:
        return KafkaConsumer(self.bootstrap, group_id, assignor, settings, self.security)

    async def _get_admin(self) -> Any:
        if self._admin is not None:
            return self._admin
        if self._admin_lock is None:
            self._admin_lock = asyncio.Lock()
        async with self._admin_lock:
            if self._admin is None:
                admin = AIOKafkaAdminClient(
                    bootstrap_servers=self.bootstrap, request_timeout_ms=self._request_timeout_ms, **self.security
                )
                try:
                    await start_client(admin.start, admin.close, self.security, "admin client", ",".join(self.bootstrap))
                except kafka_errors.KafkaError as exc:
                    await admin.close()
                    raise TransportError(
                        f"cannot reach the broker at {self.url}: {_describe(exc)}. "
                        "Fix: check the broker URL and that the broker is running"
                    ) from exc
                self._admin = admin
        return self._admin

    async def _describe_topics(self, names: Sequence[str]) -> dict[str, int]:
        """Partition counts of those topics that exist.

        Asks for *all* topics: aiokafka's per-topic metadata request sets
        allow_auto_topic_creation=True, and brokers that honour it (tansu does, with 4
        partitions) would create the topic we are only asking about.
        """
        admin = await self._get_admin()
        try:
            described = await admin.describe_topics(None)
        except kafka_errors.KafkaError as exc:
            raise TransportError(f"cannot describe topics {list(names)}: {_describe(exc)}") from exc
        counts: dict[str, int] = {}
        wanted = set(names)
        for topic in described:
            if topic["topic"] in wanted and topic.get("error_code", 0) == 0 and topic.get("partitions"):
                counts[topic["topic"]] = len(topic["partitions"])
        return counts

    async def ensure_topics(self, specs: Sequence[TopicSpec]) -> dict[str, int]:
        if not specs:
            return {}
        wanted = {spec.name: spec for spec in specs}
        existing = await self._describe_topics(list(wanted))
        missing = [spec for name, spec in wanted.items() if name not in existing]
        if missing:
            await self._create(missing)
            existing.update(await self._describe_topics([s.name for s in missing]))
        for name, spec in wanted.items():
            count = existing.get(name)
            if count is None:
                raise TransportError(
                    f"topic {name!r} still does not exist after creating it. "
                    "Fix: check that the broker allows topic creation"
                )
            if count != spec.partitions:
                raise PartitionCountMismatch(name, count, spec.partitions)
        return {name: existing[name] for name in wanted}

    async def _create(self, specs: Sequence[TopicSpec]) -> None:
        admin = await self._get_admin()
        new_topics = []
        for spec in specs:
            config = {"cleanup.policy": "compact"} if spec.compacted else {}
            config.update(spec.config)
            new_topics.append(NewTopic(spec.name, spec.partitions, 1, topic_configs=config))
        try:
            response = await admin.create_topics(new_topics)
        except kafka_errors.KafkaError as exc:
            raise TransportError(f"cannot create topics {[s.name for s in specs]}: {_describe(exc)}") from exc
        for entry in response.topic_errors:
            name, code = entry[0], entry[1]
            message = entry[2] if len(entry) > 2 else None
            if code in (0, kafka_errors.TopicAlreadyExistsError.errno):
                continue  # already exists: another worker won the race; counts are checked next
            error = kafka_errors.for_code(code)
            raise TransportError(
                f"cannot create topic {name!r}: {error.__name__} (code {code})" + (f": {message}" if message else "")
            )

    async def partition_count(self, topic: str) -> int | None:
        return (await self._describe_topics([topic])).get(topic)

    async def close(self) -> None:
        admin, self._admin = self._admin, None
        if admin is not None:
            await admin.close()

    def __repr__(self) -> str:
        return f"<KafkaTransport {self.url}>"
