"""Probing rebalances (Kafka Streams' KIP-441): a worker holding warm-up replicas checks them every
``probing_rebalance_interval`` and, once one is caught up (lag <= ``acceptable_recovery_lag``),
asks the group for a rebalance, in which the leader's lag-aware plan hands it the active task.

The partitions keep being processed by their caught-up owner meanwhile, so a new worker never
stalls a partition for a whole restore; the only pause is the rebalance itself.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .worker import Worker

log = logging.getLogger(__name__)

__all__ = ["probing_loop", "caught_up_warmups"]


def caught_up_warmups(warmups: list[int], lags: dict[int, int | None], acceptable: int) -> list[int]:
    """The warm-up partition numbers whose copy is within ``acceptable`` records of the changelog's end."""
    return [p for p in warmups if (lag := lags.get(p)) is not None and lag <= acceptable]


async def probing_loop(worker: Worker) -> None:
    """Runs beside the worker while it has tables: asks for a rebalance when warm-ups caught up."""
    settings = worker.settings
    asked_in: int | None = None  # the assignment generation a rebalance was asked in (once each)
    while True:
        await worker.clock.sleep(settings.probing_rebalance_interval)
        assignment, tables, consumer = worker.assignor.assignment, worker.tables, worker.consumer
        if not assignment.warmup or tables is None or consumer is None or asked_in == assignment.generation:
            continue
        ready = caught_up_warmups(assignment.warmup, tables.lags(), settings.acceptable_recovery_lag)
        if ready:
            log.info(
                "warm-up replicas of partitions %s caught up (lag <= %d): asking for a probing rebalance",
                ready,
                settings.acceptable_recovery_lag,
            )
            asked_in = assignment.generation
            consumer.request_rejoin()
