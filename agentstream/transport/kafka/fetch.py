"""Fetched records as :class:`~agentstream.transport.message.Message`, built in compiled code.

aiokafka reads every fetched record with a Python generator and turns it into a
``ConsumerRecord`` dataclass (``PartitionRecords._unpack_records`` / ``_consumer_record``), the
largest per-record cost left on the worker's fetch path. Our consumers mark themselves with
:func:`raw_bytes` as their key deserializer (an identity function, so without this module's hook
they read exactly as before); :func:`install` makes aiokafka's fetcher build the partition
records of marked consumers with :class:`MessageRecords`, which reads them with compiled code
(:mod:`agentstream.transport.kafka.reader`): read uncommitted, the whole reader (batches, CRC
checks, control batches, positions) is ours; read committed, aiokafka's reader with its aborted
transactions stays and only the record-to-message step is ours. Every other aiokafka consumer in
the process is untouched.

The hook depends on aiokafka's internals (pinned to 0.14.x): :func:`install` checks the shape it
relies on and otherwise leaves aiokafka alone, says so once, and our consumers convert the
ConsumerRecords they get (:func:`as_message`).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Iterator
from typing import Any

import aiokafka  # type: ignore[import-untyped,unused-ignore]
from aiokafka.consumer import fetcher as aiokafka_fetcher  # type: ignore[import-untyped,unused-ignore]
from aiokafka.record.memory_records import MemoryRecords  # type: ignore[import-untyped,unused-ignore]

from ..message import Message
from .reader import fetched_messages, from_fetched, message_of

__all__ = ["raw_bytes", "install", "as_message", "MessageRecords"]

log = logging.getLogger(__name__)


def raw_bytes(data: bytes | None) -> bytes | None:
    """The key deserializer our consumers give aiokafka: keys stay bytes; it marks the consumer
    whose partition records :class:`MessageRecords` builds."""
    return data


_Original: Any = aiokafka_fetcher.PartitionRecords


class MessageRecords(_Original):  # type: ignore[misc]
    """aiokafka's PartitionRecords giving Messages: read uncommitted, the compiled reader
    :func:`~agentstream.transport.kafka.reader.fetched_messages`; read committed, aiokafka's own
    reader (aborted transactions) with the compiled builder per record. The reader itself is
    the iterator (no Python ``__next__`` frame per record)."""

    _consumer_record = staticmethod(from_fetched)

    def __init__(
        self,
        tp: Any,
        records: Any,
        aborted_transactions: Any,
        fetch_offset: int,
        key_deserializer: Any,
        value_deserializer: Any,
        check_crcs: bool,
        isolation_level: Any,
    ) -> None:
        super().__init__(
            tp,
            records,
            aborted_transactions,
            fetch_offset,
            key_deserializer,
            value_deserializer,
            check_crcs,
            isolation_level,
        )
        if isolation_level == aiokafka_fetcher.READ_UNCOMMITTED:
            self._records_iterator = fetched_messages(self, tp, records, check_crcs)

    def __iter__(self) -> Iterator[Message]:
        it: Iterator[Message] | None = self._records_iterator
        return it if it is not None else iter(())


def _partition_records(
    tp: Any,
    records: Any,
    aborted_transactions: Any,
    fetch_offset: int,
    key_deserializer: Any,
    value_deserializer: Any,
    check_crcs: bool,
    isolation_level: Any,
) -> Any:
    """Stands for aiokafka's ``PartitionRecords`` in its fetcher module: MessageRecords for our
    consumers, the original class for every other."""
    cls = MessageRecords if key_deserializer is raw_bytes and value_deserializer is None else _Original
    return cls(
        tp,
        records,
        aborted_transactions,
        fetch_offset,
        key_deserializer,
        value_deserializer,
        check_crcs,
        isolation_level,
    )


def _shape_known() -> bool:
    """aiokafka's fetcher still has the shape the hook relies on: the constructor's parameters,
    the per-record builder it calls, and the record generator MessageRecords iterates."""
    try:
        params = list(inspect.signature(_Original.__init__).parameters)
        ours = list(inspect.signature(MessageRecords.__init__).parameters)  # what the factory passes
        if params != ours or not callable(getattr(_Original, "_consumer_record", None)):
            return False
        probe = _Original(None, MemoryRecords(b""), None, 0, None, None, False, 0)
    except Exception:
        return False
    return (
        isinstance(getattr(probe, "_records_iterator", None), Iterator)
        and hasattr(probe, "next_fetch_offset")
        and getattr(aiokafka_fetcher, "READ_UNCOMMITTED", None) == 0
    )


def install() -> bool:
    """Install the hook (idempotent). False when aiokafka's fetcher has another shape: then
    aiokafka is left alone and our consumers convert its ConsumerRecords (:func:`as_message`)."""
    if aiokafka_fetcher.PartitionRecords is _partition_records:
        return True
    if aiokafka_fetcher.PartitionRecords is not _Original or not _shape_known():
        global _warned
        if not _warned:
            _warned = True
            log.warning(
                "aiokafka's fetcher (aiokafka %s) is not the shape agentstream's compiled record builder "
                "hooks into: fetched records are converted instead, at about 0.5 µs a record. "
                "Fix: install the aiokafka version agentstream pins",
                getattr(aiokafka, "__version__", "?"),
            )
        return False
    aiokafka_fetcher.PartitionRecords = _partition_records
    return True


_warned = False


def as_message(record: Any) -> Message:
    """aiokafka's ConsumerRecord as a Message: what our consumers hand out when the hook is not
    installed (the hot path reads Messages only)."""
    return message_of(record.topic, record.partition, record.offset, record)
