"""``KafkaTransport``: the :class:`~agentstream.transport.base.Transport` for one ``kafka://`` URL."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..base import TP, Assignor, TopicSpec
from .admin import TopicAdmin
from .consumer import KafkaConsumer
from .producer import KafkaProducer
from .url import parse_kafka_url

__all__ = ["KafkaTransport"]


class KafkaTransport:
    """Producers, consumers and topic admin for one ``kafka://`` URL."""

    def __init__(
        self,
        url: str,
        *,
        request_timeout_ms: int = 30000,
        security: Mapping[str, Any] | None = None,
        replication_factor: int = -1,
    ) -> None:
        """``replication_factor``: of the topics created without their own (the app's
        ``topic_replication_factor``; -1: the broker's default)."""
        self.url = url
        self.security = dict(security or {})  # aiokafka TLS/SASL arguments (.security)
        self.bootstrap: list[str] = parse_kafka_url(url)
        self._admin = TopicAdmin(url, self.bootstrap, request_timeout_ms, self.security, replication_factor)

    def producer(self, **settings: Any) -> KafkaProducer:
        return KafkaProducer(self.bootstrap, settings, self.security)

    def consumer(self, *, group_id: str | None, assignor: Assignor | None = None, **settings: Any) -> KafkaConsumer:
        return KafkaConsumer(self.bootstrap, group_id, assignor, settings, self.security)

    async def ensure_topics(self, specs: Sequence[TopicSpec]) -> dict[str, int]:
        return await self._admin.ensure_topics(specs)

    async def partition_count(self, topic: str) -> int | None:
        return await self._admin.partition_count(topic)

    async def list_topics(self) -> list[str]:
        return await self._admin.list_topics()

    async def group_members(self, group_id: str) -> list[str]:
        return await self._admin.group_members(group_id)

    async def delete_records(self, before: Mapping[TP, int]) -> None:
        """Delete each partition's records below its offset (purge of consumed repartition records)."""
        await self._admin.delete_records(before)

    async def close(self) -> None:
        await self._admin.close()

    def __repr__(self) -> str:
        return f"<KafkaTransport {self.url}>"
