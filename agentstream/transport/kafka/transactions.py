"""Transaction calls of a transactional ``kafka://`` producer, with errors a worker can act on:
:class:`ProducerFenced` when a newer owner of the task exists, :class:`ProducerError` otherwise.

aiokafka's sender stops for good at a fence (a response with ``InvalidProducerEpoch`` or
``ProducerFenced`` to AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit or EndTxn) and leaves
its transaction manager in a fatal state, where every later call fails with an error that does not
say why: ``IllegalOperation("Can't send messages while not in transaction")`` for a send, an
invalid state transition (``AssertionError``) for ``begin_transaction``. :func:`fenced_error` finds
the fence behind those, so the worker sees :class:`ProducerFenced` whichever call meets it first.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

from aiokafka import errors as kafka_errors  # type: ignore[import-untyped,unused-ignore]

from ...exceptions import ProducerError, ProducerFenced
from .config import describe

__all__ = ["run_transaction_call", "fenced_error", "settle_fatal_error", "FENCED"]

FENCED = (kafka_errors.ProducerFenced, kafka_errors.InvalidProducerEpoch)
"""aiokafka's errors for "a newer producer with this transactional id exists"."""


def _fenced(transactional_id: str | None, what: str) -> ProducerFenced:
    return ProducerFenced(f"producer {transactional_id!r} was fenced during {what}: a newer owner of the task exists")


def fenced_error(client: Any, transactional_id: str | None, what: str) -> ProducerFenced | None:
    """The fence that stopped aiokafka's producer ``client``, if a fence is why it stopped
    (its sender task ended with one); None otherwise."""
    if transactional_id is None or client is None:
        return None
    task = getattr(getattr(client, "_sender", None), "sender_task", None)
    if task is None or not task.done() or task.cancelled():
        return None
    return _fenced(transactional_id, what) if isinstance(task.exception(), FENCED) else None


async def run_transaction_call(transactional_id: str | None, what: str, call: Awaitable[Any], client: Any) -> None:
    """Await one of aiokafka's transaction calls on ``client`` and translate its errors."""
    try:
        await call
    except FENCED as exc:
        raise _fenced(transactional_id, what) from exc
    except (kafka_errors.KafkaError, kafka_errors.IllegalOperation, ValueError, AssertionError) as exc:
        fenced = fenced_error(client, transactional_id, what)
        if fenced is not None:
            raise fenced from exc
        raise ProducerError(f"{what} failed for producer {transactional_id!r}: {describe(exc)}") from exc


def settle_fatal_error(client: Any) -> None:
    """Mark the errors a stopped transactional producer leaves in futures nobody awaits seen: its
    transaction waiter and the drain waiters of the batches its sender failed (asyncio would log
    "Future exception was never retrieved" at ERROR for each when they are collected)."""
    waiters = [getattr(getattr(client, "_txn_manager", None), "_transaction_waiter", None)]
    accumulator = getattr(client, "_message_accumulator", None)
    batches = [b for queue in getattr(accumulator, "_batches", {}).values() for b in queue]
    batches += list(getattr(accumulator, "_pending_batches", ()))
    waiters += [getattr(b, "_drain_waiter", None) for b in batches]
    for waiter in waiters:
        if isinstance(waiter, asyncio.Future) and waiter.done() and not waiter.cancelled():
            waiter.exception()
