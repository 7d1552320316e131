"""The memory producer: appends to the broker at once, with Kafka's partitioning and transaction rules."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, ClassVar, Unpack

from aiokafka.structs import RecordMetadata  # type: ignore[import-untyped, unused-ignore]

from agentstream.exceptions import ProducerError, ProducerFenced, RecordRejected, TransportError
from agentstream.transport.append import Appender
from agentstream.transport.base import TP, Headers, SendOptions
from agentstream.transport.partitioner import default_partition

from .broker import MemoryBroker, Transaction

__all__ = ["MemoryProducer"]


LATE_INIT_BACKOFF_S = 0.02  # InitProducerId while the id's last transaction completes (txn_offsets_late)


class MemoryProducer(Appender):
    """Appends synchronously: the returned future is already resolved, ``flush`` has nothing to wait for.

    Failures (only injected ones, see :class:`~agentstream.transport.memory.faults.MemoryFaults`) are
    sticky like the kafka:// producer's: every later ``flush()`` raises until the producer is stopped
    or its transaction aborted. There is no batch a cancelled ``send`` could leave half-filled: a send
    appends without suspending, so it either happened or did not.

    With a ``transactional_id`` it follows Kafka's transaction rules: sends only inside a
    transaction, records invisible to read_committed readers until the commit, and a newer
    producer with the same id fences this one (its next operation raises ProducerFenced).
    """

    def __init__(self, broker: MemoryBroker, transactional_id: str | None = None, **settings: Any) -> None:
        self._broker = broker
        self._next: dict[str, int] = {}  # round-robin cursor per topic for keyless records
        self._started = self._stopped = False
        self.transactional_id = transactional_id
        self._epoch = -1
        self._txn: Transaction | None = None
        self._failure: str | None = None  # raised by every flush until stop() / abort_transaction()
        self._fenced: BaseException | None = None  # fence() .. unfence(): sends and flushes raise it

    async def fence(self, error: BaseException) -> None:
        """Nothing to drop (every send was appended at once); sends and flushes raise ``error``
        until :meth:`unfence`, as the kafka:// producer's do."""
        self._fenced = error

    async def unfence(self) -> None:
        self._fenced = None

    async def start(self) -> None:
        if self.transactional_id is not None and not self._started:
            if self.transactional_id in self._broker.late_offsets:
                # Kafka answers CONCURRENT_TRANSACTIONS while the id's last transaction completes, and
                # the client asks again after its retry backoff (txn_offsets_late)
                await asyncio.sleep(LATE_INIT_BACKOFF_S)
            self._epoch = self._broker.init_producer(self.transactional_id)
        self._started = True

    def _check_running(self, before: str) -> None:
        if not self._started or self._stopped:
            raise TransportError(f"memory producer is not running: call start() {before} and not after stop()")

    # -- transactions ---------------------------------------------------------------------------
    def _check_transactional(self) -> str:
        """This producer's transactional_id, once it is known to be running and not fenced."""
        tid = self.transactional_id
        if tid is None:
            raise TransportError(
                "this producer has no transactional_id: create it with transport.producer(transactional_id=...)"
            )
        self._check_running("first")
        if self._broker.txn_epochs.get(tid) != self._epoch:
            self._txn = None
            raise ProducerFenced(
                f"producer {tid!r} (epoch {self._epoch}) was fenced by a newer producer with the same transactional_id"
            )
        return tid

    def _open_txn(self) -> Transaction:
        """The open transaction; an error when there is none (or the producer was fenced)."""
        tid = self._check_transactional()
        if self._txn is None:
            raise TransportError(f"producer {tid!r} has no open transaction: call begin_transaction() first")
        return self._txn

    def _check_not_failed(self, txn: Transaction, what: str) -> None:
        if txn.failed is not None:
            raise ProducerError(
                f"producer {self.transactional_id!r} cannot {what}: {txn.failed}; abort the transaction"
            )

    async def begin_transaction(self) -> None:
        tid = self._check_transactional()
        if self._txn is not None:
            raise TransportError(f"producer {tid!r} already has an open transaction")
        self._txn = Transaction(tid, self._epoch)
        self._broker.open_txns[tid] = self._txn

    async def send_offsets_to_transaction(self, offsets: Mapping[TP, int], group_id: str) -> None:
        self._open_txn().offsets.setdefault(group_id, {}).update(offsets)

    async def commit_transaction(self) -> None:
        txn = self._open_txn()
        faults = self._broker.faults
        if txn.failed is None and faults.take("txn_commit_fail"):
            txn.failed = "commit_transaction failed (injected: coordinator not available)"
            raise ProducerError(f"producer {self.transactional_id!r}: {txn.failed}; abort the transaction")
        if txn.failed is None and faults.take("txn_abort"):
            txn.failed = "the coordinator aborted the transaction (injected)"
            self._broker.end_txn(txn, commit=False)
            raise ProducerError(f"producer {self.transactional_id!r}: {txn.failed}")
        self._check_not_failed(txn, "commit")
        self._txn = None
        self._broker.end_txn(txn, commit=True)

    async def abort_transaction(self) -> None:
        txn = self._open_txn()
        self._txn = None
        self._failure = None  # the failed records are discarded with the transaction
        self._broker.end_txn(txn, commit=False)

    async def stop(self) -> None:
        self._stopped = True
        self._failure = None

    # -- sending ----------------------------------------------------------------------------------
    _SEND_OPTIONS: ClassVar[frozenset[str]] = SendOptions.__optional_keys__ | SendOptions.__required_keys__

    async def send(
        self, topic: str, key: bytes | None, value: bytes | None, **options: Unpack[SendOptions]
    ) -> asyncio.Future[RecordMetadata]:
        if options and not self._SEND_OPTIONS.issuperset(options):  # as the Kafka producer's keywords
            unknown = sorted(options.keys() - self._SEND_OPTIONS)
            raise TypeError(f"send() got unexpected keyword argument(s) {', '.join(map(repr, unknown))}")
        return self.send_now(
            topic, key, value, options.get("partition"), options.get("timestamp_ms"), options.get("headers")
        )

    def send_now(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        partition: int | None,
        timestamp_ms: int | None,
        headers: Headers | None,
    ) -> asyncio.Future[RecordMetadata]:
        """The memory broker appends at once: every send is a synchronous one."""
        self._check_running("before send()")
        if self._fenced is not None:
            raise self._fenced
        txn = self._open_txn() if self.transactional_id is not None else None
        if txn is not None:
            self._check_not_failed(txn, "send")
        n = len(self._broker.topic(topic).partitions)
        if partition is not None and not 0 <= partition < n:  # as the kafka:// producer
            raise RecordRejected(f"could not send to {topic}[{partition}]: the topic has partitions 0..{n - 1}")
        if partition is None:
            if key is not None:
                partition = default_partition(key, n)
            else:
                partition = self._next.get(topic, 0) % n
                self._next[topic] = partition + 1
        fut: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        faults = self._broker.faults
        if faults.active:
            for kind in ("send_fail", "send_cancel"):
                if faults.take(kind):
                    return self._fail(fut, kind, TP(topic, partition), txn)
        meta = self._broker.append(TP(topic, partition), key, value, timestamp_ms, headers or (), txn)
        fut.set_result(meta)
        return fut

    def _fail(
        self, fut: asyncio.Future[RecordMetadata], kind: str, tp: TP, txn: Transaction | None
    ) -> asyncio.Future[RecordMetadata]:
        what = "was cancelled" if kind == "send_cancel" else "failed"
        message = f"delivery to {tp.topic}[{tp.partition}] {what} (injected); offsets past it must not be committed"
        if self._failure is None:
            self._failure = message
        if txn is not None and txn.failed is None:
            txn.failed = message
        if kind == "send_cancel":
            fut.cancel()
        else:
            fut.set_exception(ProducerError(message))
            fut.exception()  # retrieved: reported by flush(), not by the garbage collector
        return fut

    async def flush(self) -> None:
        if self._fenced is not None:
            raise self._fenced
        if self._failure is not None:
            raise ProducerError(self._failure)

    async def partitions_for(self, topic: str) -> int:
        return len(self._broker.topic(topic).partitions)
