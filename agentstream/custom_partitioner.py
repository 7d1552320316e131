"""Faust's ``producer_partitioner``: the app's function chooses the partition of each record sent
without one, ``partitioner(key_bytes, all_partitions, available_partitions) -> partition``, as
aiokafka calls it in Faust. Records with an explicit partition (changelogs, replies to a given
partition) keep it. A table fed through a topic partitioned this way has its keys where the
function put them, not where the table reads them (a warning says so when it happens): declare
such tables' streams with ``group_by`` to re-key them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Unpack

from .exceptions import ConfigError
from .transport.base import Delivery, Headers, Producer, SendOptions

__all__ = ["PartitionerProducer", "check_partitioner"]

Partitioner = Callable[[bytes | None, list[int], list[int]], int]


def check_partitioner(value: Any) -> Partitioner:
    if not callable(value):
        raise ConfigError(
            "producer_partitioner",
            f"{value!r} is not callable",
            "pass a function (key_bytes, all_partitions, available_partitions) -> partition",
        )
    return value  # type: ignore[no-any-return]


class PartitionerProducer:
    """A producer whose records without a partition go where the app's partitioner says."""

    def __init__(self, inner: Producer, partitioner: Partitioner) -> None:
        self.inner = inner
        self.partitioner = partitioner

    def __getattr__(self, name: str) -> Any:  # start, stop, flush, partitions_for, fence, transactions...
        return getattr(self.inner, name)

    async def _choose(self, topic: str, key: bytes | None) -> int:
        n = await self.inner.partitions_for(topic)
        partitions = list(range(n))
        chosen = self.partitioner(key, partitions, partitions)
        if not isinstance(chosen, int) or isinstance(chosen, bool) or chosen not in partitions:
            raise ConfigError(
                "producer_partitioner",
                f"it answered {chosen!r} for topic {topic!r}, which has partitions 0..{n - 1}",
                "return one of the partitions it is given",
            )
        return chosen

    async def send(
        self, topic: str, key: bytes | None, value: bytes | None, **options: Unpack[SendOptions]
    ) -> Delivery:
        if options.get("partition") is None:
            options["partition"] = await self._choose(topic, key)
        return await self.inner.send(topic, key, value, **options)

    def send_now(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        partition: int | None,
        timestamp_ms: int | None,
        headers: Headers | None,
    ) -> Delivery | None:
        if partition is None:
            return None  # the partition count is asked for: send() chooses
        return self.inner.send_now(topic, key, value, partition, timestamp_ms, headers)
