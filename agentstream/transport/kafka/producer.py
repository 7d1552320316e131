"""The ``kafka://`` producer: a facade over its parts, as aiokafka's producer is over its
accumulator, sender and transaction manager.

- :mod:`.partitioning`: which partition a record without one goes to (key memo, sticky);
- :mod:`.accumulator` and :mod:`.batches`: the open batch per partition, deliveries, and the
  sticky failure every later flush raises;
- :mod:`.sender`: hand-over of batches to aiokafka's accumulator, in order, with back-pressure;
- :mod:`.transactions`: the transaction calls and their errors;
- :mod:`.abort`: closing aiokafka's producer so nothing it holds is delivered later (a fence).

The facade keeps one route table (topic -> partition count, key memo, open batches) whose
entries are the parts' own dicts, so a record's way through :meth:`KafkaProducer.send_now` is a
few dict reads and one C-level append.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any, Final

from aiokafka import AIOKafkaProducer  # type: ignore[import-untyped,unused-ignore]
from aiokafka import errors as kafka_errors  # type: ignore[import-untyped,unused-ignore]
from aiokafka.record.default_records import (  # type: ignore[import-untyped,unused-ignore]
    DefaultRecordBatchBuilder,
)

from ...exceptions import (
    GroupFenced,
    ProducerError,
    ProducerFenced,
    RecordRejected,
    TransactionsUnsupported,
    TransportError,
    caused,
)
from ..append import Appender
from ..base import TP, Delivery, Headers
from .abort import abort_producer
from .accumulator import Accumulator
from .batches import OpenBatch, RecordDelivery
from .config import PRODUCER_KEYS, describe, pick, started
from .conn_guard import install as install_conn_guard
from .partitioning import Partitioning
from .security import start_client
from .sender import Sender
from .transactions import FENCED, fenced_error, run_transaction_call, settle_fatal_error

__all__ = ["KafkaProducer"]

_NO_HEADERS: Final[list[tuple[str, bytes]]] = []  # read-only: the batch builder only iterates it


class KafkaProducer(Appender):
    """AIOKafkaProducer with acks=all, framework-side batch filling, and flush() that reports failures.

    Records are appended to one open batch per partition (:mod:`.batches`). A batch is
    handed to aiokafka as soon as it is opened, and filled until aiokafka's sender takes it or it
    is full, exactly like ``AIOKafkaProducer.send`` fills its batches, so ``linger_ms`` and
    ``max_batch_size`` keep their meaning.

    Failures are sticky (:mod:`.accumulator`): every ``flush()`` after a failed, cancelled or
    unqueued batch raises until the producer is stopped (or, for a transactional producer, the
    transaction is aborted, which discards the failed records with it).

    ``client_factory`` builds aiokafka's producer at :meth:`start` (a seam for tests that script it).
    """

    def __init__(
        self,
        bootstrap: list[str],
        settings: Mapping[str, Any],
        security: Mapping[str, Any] | None = None,
        client_factory: Callable[..., Any] = AIOKafkaProducer,
    ) -> None:
        self._bootstrap = bootstrap
        self._config: dict[str, Any] = {"acks": "all", "linger_ms": 5}
        self._config.update(pick(settings, PRODUCER_KEYS))
        self._security = dict(security or {})
        self._client_factory = client_factory
        self._producer: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._partitioning = Partitioning()
        self._sticky = self._partitioning.sticky
        self._batches = Accumulator()
        self._sender = Sender(float(self._config.get("request_timeout_ms", 40_000)) / 1000.0)
        self._max_request_size: int = int(self._config.get("max_request_size", 1_048_576))
        # topic -> (partition count, key -> partition memo, open batches): the parts' own objects
        self._routes: dict[str, tuple[int, dict[bytes, int], dict[int, OpenBatch]]] = {}
        self.transactional_id: str | None = self._config.get("transactional_id")
        self._fenced: GroupFenced | None = None  # set by fence(), cleared by unfence()

    async def start(self) -> None:
        if self._producer is not None or self._fenced is not None:
            return
        await self._start_client()

    async def _start_client(self) -> None:
        install_conn_guard()  # a request on a connection a dead broker reset fails as a connection error
        producer = self._client_factory(bootstrap_servers=self._bootstrap, **self._config, **self._security)
        try:
            await start_client(producer.start, producer.stop, self._security, "producer", ",".join(self._bootstrap))
        except kafka_errors.KafkaError as exc:
            await producer.stop()
            if self.transactional_id is not None and not isinstance(exc, kafka_errors.KafkaConnectionError):
                # InitProducerId failed: the broker has no transaction coordinator (tansu answers
                # UnknownError at once). Say which setting needs it instead of degrading silently.
                raise caused(
                    TransactionsUnsupported(
                        ",".join(self._bootstrap), f"InitProducerId for {self.transactional_id!r}: {describe(exc)}"
                    ),
                    exc,
                ) from exc
            raise caused(
                TransportError(
                    f"producer could not connect to {','.join(self._bootstrap)}: {describe(exc)}. "
                    "Fix: check the broker URL and that the broker is running"
                ),
                exc,
            ) from exc
        self._producer = producer
        self._loop = asyncio.get_running_loop()

    async def stop(self) -> None:
        producer, self._producer = self._producer, None
        self._fenced = None  # a stopped producer starts afresh
        self._batches.reset()
        if producer is not None:
            settle_fatal_error(producer)
            await producer.stop()

    def _require(self) -> Any:
        if self._fenced is not None:
            raise self._fenced
        return started(self._producer, "producer")

    # -- fencing ---------------------------------------------------------------------------------
    async def fence(self, error: GroupFenced) -> None:
        """This member may have been fenced: drop every record not yet acknowledged, so none of
        them can land after the group moved on (a zombie's late writes).

        Our open and handed-over batches fail with ``error`` (every flush raises it, so no commit
        passes them), and aiokafka's producer is closed without delivering anything more, its
        connections reset (:mod:`.abort`). Sends raise ``error`` until :meth:`unfence`.
        """
        if self._fenced is not None:
            return
        self._fenced = error
        self._batches.fail_all(error)
        client, self._producer = self._producer, None
        if client is not None:
            await abort_producer(client, error)

    async def unfence(self) -> None:
        """After the rejoin: a new aiokafka producer, and a new generation of batches (the fence's
        failure no longer fails flushes). No-op when not fenced."""
        if self._fenced is None:
            return
        # Sends and flushes go on raising the fence until the new client is up: a commit that
        # flushes meanwhile meets the fence (the worker goes on), not a producer without a client.
        await self._start_client()
        self._fenced = None
        self._batches.reset()

    async def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        *,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Headers | None = None,
    ) -> Delivery:
        """:class:`~agentstream.transport.base.SendOptions` spelled out: keyword-only parameters
        cost a third of ``**options`` per call, and changelog writes come through here."""
        route = self._routes.get(topic)  # one lookup per record for all the per-topic state
        if route is None:
            await self._learn_topic(topic)
            route = self._routes[topic]
        chosen = self._partition(topic, route, key, partition)
        if chosen < 0:
            raise RecordRejected(f"could not send to {topic}[{partition}]: the topic has partitions 0..{route[0] - 1}")
        hdrs = list(headers) if headers else _NO_HEADERS
        batch = route[2].get(chosen)
        if batch is not None:
            meta = batch.append(timestamp_ms, key, value, hdrs)
            if meta is not None:
                return RecordDelivery(batch, meta)
        # No open batch, or it is full or already taken by the sender: open the next one. Only a
        # batch's first record can outgrow max_batch_size, and the settings refuse a
        # max_request_size below it, so this is where aiokafka's max_request_size check belongs.
        size = DefaultRecordBatchBuilder.estimate_size_in_bytes(key, value, hdrs)
        if size > self._max_request_size:
            raise RecordRejected(
                f"could not send to {topic}: the record is {size} bytes, more than producer_max_request_size="
                f"{self._max_request_size}"
            )
        batch = self._new_batch(topic, chosen)
        meta = batch.append(timestamp_ms, key, value, hdrs)  # a first record always fits
        await self._hand_over(batch)
        return RecordDelivery(batch, meta)

    def send_now(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        partition: int | None,
        timestamp_ms: int | None,
        headers: Headers | None,
    ) -> Delivery | None:
        """:meth:`send` without a coroutine when it needs none: the record's partition has an
        open batch with room. None: nothing was appended, call :meth:`send` (first send to the
        topic, no open batch or a full one, a partition out of range). ``Topic.send`` tries this
        first: one coroutine less per record. Every argument positional: the cheapest call."""
        route = self._routes.get(topic)
        if route is None:
            return None
        # a keyed record whose key was seen (the memo of _partition()), inline: no call per record
        chosen = -1 if key is None or partition is not None else route[1].get(key, -1)
        if chosen < 0:
            chosen = self._partition(topic, route, key, partition)
            if chosen < 0:
                return None  # send() raises the error
        batch = route[2].get(chosen)
        if batch is None:
            return None
        hdrs = list(headers) if headers else _NO_HEADERS
        records = batch.records  # OpenBatch.append()'s common case, inline: the RecordBuilder
        meta = (
            batch.append(timestamp_ms, key, value, hdrs)
            if records is None
            else records.add(timestamp_ms, key, value, hdrs)
        )
        return None if meta is None else RecordDelivery(batch, meta)

    def _partition(
        self,
        topic: str,
        route: tuple[int, dict[bytes, int], dict[int, OpenBatch]],
        key: bytes | None,
        partition: int | None,
    ) -> int:
        """The record's partition: the one given (-1 when out of range), else the key's (Kafka's
        default partitioner, memoised), else the topic's sticky partition for keyless records."""
        count = route[0]
        if partition is not None:
            return partition if 0 <= partition < count else -1
        if key is not None:
            chosen = route[1].get(key)
            return self._partitioning.hash_partition(topic, key, count) if chosen is None else chosen
        chosen = self._sticky.get(topic)
        return self._partitioning.sticky_partition(topic, count) if chosen is None else chosen

    async def _learn_topic(self, topic: str) -> int:
        """First send to a topic: wait for its metadata once; later sends never await it."""
        count = await self._metadata(topic, ProducerError, f"could not send to {topic}: no metadata")
        memo = self._partitioning.learn(topic, count)
        self._sender.learn(topic, count)
        self._routes[topic] = (count, memo, self._batches.topic(topic))
        return count

    def _new_batch(self, topic: str, partition: int) -> OpenBatch:
        assert self._loop is not None
        batch = self._batches.new_batch(topic, partition, self._require().create_batch(), self._loop)
        self._partitioning.batch_opened(topic, partition)
        return batch

    async def _hand_over(self, batch: OpenBatch) -> None:
        """Queue an open batch in aiokafka's accumulator (:mod:`.sender`); a flush waits for it."""
        self._batches.sent.append(batch)
        try:
            await self._sender.hand_over(self._producer, batch)
        except ProducerError as exc:
            fenced = fenced_error(self._producer, self.transactional_id, f"a send to {batch.topic}")
            if fenced is not None:
                raise fenced from exc
            raise

    async def flush(self) -> None:
        """Wait for every batch handed over so far; raise the producer's failure if it has one.

        The failure is raised by *every* flush until :meth:`stop` (or an aborted transaction):
        handing it over once would let the next commit pass the lost records.
        """
        if self._fenced is not None:
            raise self._fenced
        producer = self._require()
        waiting = self._batches.take_sent()
        try:
            await producer.flush()
        except kafka_errors.KafkaError as exc:
            raise caused(ProducerError(f"flush failed: {describe(exc)}"), exc) from exc
        unresolved = [b.delivered for b in waiting if not b.delivered.done()]
        if unresolved:
            await asyncio.wait(unresolved)
        try:
            self._batches.raise_failure()
        except ProducerError as exc:
            fenced = fenced_error(producer, self.transactional_id, "flush")
            if fenced is not None or isinstance(exc.__cause__, FENCED):
                raise (fenced or ProducerFenced(f"producer {self.transactional_id!r} was fenced: {exc}")) from exc
            raise

    async def partitions_for(self, topic: str) -> int:
        return await self._metadata(topic, TransportError, f"no metadata for topic {topic!r}")

    async def _metadata(self, topic: str, error: type[TransportError], what: str) -> int:
        """The topic's partition count from aiokafka's metadata; ``error(what: cause)`` if it has none."""
        try:
            partitions = await self._require().partitions_for(topic)
        except kafka_errors.TopicAuthorizationFailedError as exc:
            if error is ProducerError:  # a send: refused for good (the production_exception_handler decides)
                raise caused(
                    RecordRejected(f"{what}: the app is not authorised to write it ({describe(exc)})"), exc
                ) from exc
            raise caused(error(f"{what}: {describe(exc)}"), exc) from exc
        except kafka_errors.KafkaError as exc:
            raise caused(error(f"{what}: {describe(exc)}"), exc) from exc
        return len(partitions)

    # -- transactions (:mod:`.transactions`) ------------------------------------------------------
    async def begin_transaction(self) -> None:
        client = self._require()
        await run_transaction_call(self.transactional_id, "begin_transaction", client.begin_transaction(), client)

    async def send_offsets_to_transaction(self, offsets: Mapping[TP, int], group_id: str) -> None:
        if offsets:
            client = self._require()
            await run_transaction_call(
                self.transactional_id,
                "send_offsets_to_transaction",
                client.send_offsets_to_transaction(dict(offsets), group_id),
                client,
            )

    async def commit_transaction(self) -> None:
        client = self._require()
        await run_transaction_call(self.transactional_id, "commit_transaction", client.commit_transaction(), client)

    async def abort_transaction(self) -> None:
        # Aborted with the transaction (failed records included): later records start new batches,
        # and once the abort succeeded, a failure of its batches no longer fails flushes.
        batches = self._batches
        failure = batches.failure
        batches.reset()
        batches.failure = failure
        client = self._require()
        await run_transaction_call(self.transactional_id, "abort_transaction", client.abort_transaction(), client)
        batches.failure = None
