"""Transaction calls of a transactional ``kafka://`` producer, with errors a worker can act on:
:class:`ProducerFenced` when a newer owner of the task exists, :class:`ProducerError` otherwise."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from aiokafka import errors as kafka_errors  # type: ignore[import-untyped,unused-ignore]

from ...exceptions import ProducerError, ProducerFenced
from .config import describe

__all__ = ["run_transaction_call"]


async def run_transaction_call(transactional_id: str | None, what: str, call: Awaitable[Any]) -> None:
    """Await one of aiokafka's transaction calls and translate its errors."""
    try:
        await call
    except (kafka_errors.ProducerFenced, kafka_errors.InvalidProducerEpoch) as exc:
        raise ProducerFenced(
            f"producer {transactional_id!r} was fenced during {what}: a newer owner of the task exists"
        ) from exc
    except (kafka_errors.KafkaError, ValueError) as exc:
        raise ProducerError(f"{what} failed for producer {transactional_id!r}: {describe(exc)}") from exc
