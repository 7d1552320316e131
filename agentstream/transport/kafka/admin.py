"""Topic administration for ``kafka://``: one admin client per transport, created on first use."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from aiokafka import errors as kafka_errors  # type: ignore[import-untyped,unused-ignore]
from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # type: ignore[import-untyped,unused-ignore]

from ...exceptions import PartitionCountMismatch, TransportError
from ..base import TopicSpec
from .config import describe
from .security import start_client

__all__ = ["TopicAdmin"]


class TopicAdmin:
    """Creates missing topics and reads partition counts (never by a metadata request that could
    create the topic it asks about)."""

    def __init__(self, url: str, bootstrap: list[str], request_timeout_ms: int, security: Mapping[str, Any]) -> None:
        self._url = url
        self._bootstrap = bootstrap
        self._request_timeout_ms = request_timeout_ms
        self._security = dict(security)
        self._admin: Any = None
        self._admin_lock: asyncio.Lock | None = None

    async def client(self) -> Any:
        if self._admin is not None:
            return self._admin
        if self._admin_lock is None:
            self._admin_lock = asyncio.Lock()
        async with self._admin_lock:
            if self._admin is None:
                admin = AIOKafkaAdminClient(
                    bootstrap_servers=self._bootstrap, request_timeout_ms=self._request_timeout_ms, **self._security
                )
                try:
                    await start_client(
                        admin.start, admin.close, self._security, "admin client", ",".join(self._bootstrap)
                    )
                except kafka_errors.KafkaError as exc:
                    await admin.close()
                    raise TransportError(
                        f"cannot reach the broker at {self._url}: {describe(exc)}. "
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
        admin = await self.client()
        try:
            described = await admin.describe_topics(None)
        except kafka_errors.KafkaError as exc:
            raise TransportError(f"cannot describe topics {list(names)}: {describe(exc)}") from exc
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
        admin = await self.client()
        new_topics = []
        for spec in specs:
            config = {"cleanup.policy": "compact"} if spec.compacted else {}
            config.update(spec.config)
            new_topics.append(NewTopic(spec.name, spec.partitions, 1, topic_configs=config))
        try:
            response = await admin.create_topics(new_topics)
        except kafka_errors.KafkaError as exc:
            raise TransportError(f"cannot create topics {[s.name for s in specs]}: {describe(exc)}") from exc
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

    async def list_topics(self) -> list[str]:
        admin = await self.client()
        try:
            return sorted(await admin.list_topics())
        except kafka_errors.KafkaError as exc:
            raise TransportError(f"cannot list the topics: {describe(exc)}") from exc

    async def group_members(self, group_id: str) -> list[str]:
        """DescribeGroups: the member ids of a group that is neither Dead nor Empty."""
        admin = await self.client()
        try:
            described = await admin.describe_consumer_groups([group_id])
        except kafka_errors.KafkaError as exc:
            raise TransportError(f"cannot describe consumer group {group_id!r}: {describe(exc)}") from exc
        members: list[str] = []
        for response in described:
            for group in getattr(response, "groups", []):
                # (error_code, group_id, state, protocol_type, protocol, members[, ...])
                if group[1] != group_id or group[2] in ("Dead", "Empty"):
                    continue
                members.extend(str(member[0]) for member in group[5])  # member ids
        return members

    async def close(self) -> None:
        admin, self._admin = self._admin, None
        if admin is not None:
            await admin.close()
