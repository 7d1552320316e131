"""Topic administration for ``kafka://``: one admin client per transport, created on first use."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from aiokafka import errors as kafka_errors  # type: ignore[import-untyped,unused-ignore]
from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete  # type: ignore[import-untyped,unused-ignore]
from aiokafka.admin.config_resource import (  # type: ignore[import-untyped,unused-ignore]
    ConfigResource,
    ConfigResourceType,
)

from ...exceptions import PartitionCountMismatch, TransportError
from ..base import TP, TopicSpec
from . import topic_requests
from .config import describe
from .conn_guard import install as install_conn_guard
from .security import start_client
from .topic_requests import BROKER_DEFAULT

log = logging.getLogger("agentstream.transport")

__all__ = ["TopicAdmin", "ATTEMPT_S"]

T = TypeVar("T")

# One admin request's try at most: aiokafka waits for its node to be ready until the request timeout, and the
# node it picked may be a broker that just died (see TopicAdmin._retried).
ATTEMPT_S = 10.0


class TopicAdmin:
    """Creates missing topics and reads partition counts (never by a metadata request that could
    create the topic it asks about)."""

    def __init__(
        self,
        url: str,
        bootstrap: list[str],
        request_timeout_ms: int,
        security: Mapping[str, Any],
        replication_factor: int = BROKER_DEFAULT,
    ) -> None:
        self._url = url
        self._replication_factor = replication_factor  # the app's topic_replication_factor
        self._warned: set[str] = set()  # existing topics already checked against their spec
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
                install_conn_guard()  # a request on a connection a dead broker reset fails as a connection error
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

    async def _retried(self, call: Callable[[Any], Awaitable[T]]) -> T:
        """``call(admin)``, tried again on a retriable error (a lost connection, a node not ready, a timeout)
        with fresh metadata, until the request timeout; then its last error.

        aiokafka sends an admin request to a random broker of its metadata, or to the controller it last
        heard of, without trying another when that one is down. On a cluster a dead broker stays in the
        metadata until the controller fences it (``broker.session.timeout.ms``, 9 s by default), so a worker
        starting meanwhile would otherwise fail at start one time in three. The next try picks again, from
        metadata that leaves the dead broker out once it is fenced.
        """
        admin = await self.client()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._request_timeout_ms / 1000
        delay = 0.1
        while True:
            left = deadline - loop.time()
            try:
                return await asyncio.wait_for(call(admin), min(ATTEMPT_S, max(left, 0.1)))
            except (kafka_errors.KafkaError, TimeoutError) as exc:
                retriable = isinstance(exc, TimeoutError) or getattr(exc, "retriable", False)
                if not retriable or loop.time() + delay >= deadline:
                    if isinstance(exc, TimeoutError):
                        raise kafka_errors.KafkaTimeoutError(f"no answer in {self._request_timeout_ms} ms") from exc
                    raise
                log.debug("admin request failed (%s): trying again with fresh metadata", describe(exc))
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)
            client = getattr(admin, "_client", None)  # aiokafka's client; refreshed so a fenced broker drops out
            if client is not None:
                try:
                    await asyncio.wait_for(client.force_metadata_update(), min(ATTEMPT_S, max(left, 0.1)))
                except (kafka_errors.KafkaError, TimeoutError):
                    pass  # the next try meets the cause

    async def _describe_topics(self, names: Sequence[str]) -> dict[str, tuple[int, int]]:
        """``(partition count, replication factor)`` of those topics that exist.

        Asks for *all* topics: aiokafka's per-topic metadata request sets
        allow_auto_topic_creation=True, and brokers that honour it (tansu does, with 4
        partitions) would create the topic we are only asking about.
        """
        try:
            described = await self._retried(lambda a: a.describe_topics(None))
        except kafka_errors.KafkaError as exc:
            raise TransportError(f"cannot describe topics {list(names)}: {describe(exc)}") from exc
        found: dict[str, tuple[int, int]] = {}
        wanted = set(names)
        for topic in described:
            partitions = topic.get("partitions")
            if topic["topic"] in wanted and topic.get("error_code", 0) == 0 and partitions:
                replication = min(len(p.get("replicas") or ()) for p in partitions)
                found[topic["topic"]] = (len(partitions), replication)
        return found

    async def _until_described(self, names: Sequence[str]) -> dict[str, tuple[int, int]]:
        """The just-created topics, once the broker answering the describe knows them all.

        On a cluster, CreateTopics returns when the controller has the topic; each broker learns it from the
        metadata log a moment later, and the describe may reach one that has not yet (Kafka Streams' internal
        topic manager waits the same way). Bounded by the request timeout; what is still missing then is
        reported by the caller.
        """
        deadline = asyncio.get_running_loop().time() + self._request_timeout_ms / 1000
        delay = 0.02
        while True:
            found = await self._describe_topics(names)
            if len(found) == len(names) or asyncio.get_running_loop().time() + delay > deadline:
                return found
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.5)

    async def ensure_topics(self, specs: Sequence[TopicSpec]) -> dict[str, int]:
        if not specs:
            return {}
        wanted = {spec.name: spec for spec in specs}
        existing = await self._describe_topics(list(wanted))
        missing = [spec for name, spec in wanted.items() if name not in existing]
        await self._warn_differences([wanted[name] for name in existing], existing)
        if missing:
            await self._create(missing)
            existing.update(await self._until_described([s.name for s in missing]))
        for name, spec in wanted.items():
            if name not in existing:
                raise TransportError(
                    f"topic {name!r} still does not exist after creating it. "
                    "Fix: check that the broker allows topic creation"
                )
            count = existing[name][0]
            if count != spec.partitions:
                raise PartitionCountMismatch(name, count, spec.partitions)
        return {name: existing[name][0] for name in wanted}

    async def _warn_differences(self, specs: Sequence[TopicSpec], found: Mapping[str, tuple[int, int]]) -> None:
        """A warning per existing topic whose replication factor or cleanup policy is not what the
        app asks (it is not altered: changing a running topic is the operator's decision)."""
        specs = [spec for spec in specs if spec.name not in self._warned]
        asks_policy = [s.name for s in specs if topic_requests.cleanup_policy(topic_requests.creation_configs(s))]
        configs = await self._topic_configs(asks_policy)
        for spec in specs:
            self._warned.add(spec.name)
            asked = topic_requests.replication_for(spec, self._replication_factor)
            for line in topic_requests.mismatches(spec, asked, found[spec.name][1], configs.get(spec.name)):
                log.warning("%s", line)

    async def _topic_configs(self, names: Sequence[str]) -> dict[str, dict[str, str]]:
        """DescribeConfigs of ``names``: the topics' configs (best effort: {} when refused)."""
        if not names:
            return {}
        try:
            resources = [ConfigResource(ConfigResourceType.TOPIC, n) for n in names]
            responses = await self._retried(lambda a: a.describe_configs(resources))
        except kafka_errors.KafkaError as exc:
            log.debug("cannot describe the configs of %s: %s", list(names), describe(exc))
            return {}
        out: dict[str, dict[str, str]] = {}
        for response in responses:
            for resource in response.resources:
                # (error_code, error_message, resource_type, resource_name, config_entries)
                if resource[0] == 0:
                    out[resource[3]] = {str(entry[0]): str(entry[1]) for entry in resource[4] if entry[1] is not None}
        return out

    async def _broker_count(self) -> int:
        try:
            cluster = await self._retried(lambda a: a.describe_cluster())
        except kafka_errors.KafkaError:
            return 0
        return len(cluster.get("brokers") or ())

    async def _create(self, specs: Sequence[TopicSpec]) -> None:
        asked = {spec.name: topic_requests.replication_for(spec, self._replication_factor) for spec in specs}
        refused = await self._create_topics(specs, asked)
        defaults = [spec for spec in specs if spec.name in refused and asked[spec.name] == BROKER_DEFAULT]
        if defaults:  # a broker older than KIP-464 (Kafka 2.4): no "broker default" factor
            fallback = topic_requests.fallback_replication(await self._broker_count())
            log.info(
                "the broker does not take replication factor -1 (its default; Kafka < 2.4): creating %s with %d",
                ", ".join(s.name for s in defaults),
                fallback,
            )
            refused = await self._create_topics(defaults, {s.name: fallback for s in defaults})
            asked.update({s.name: fallback for s in defaults})
        for spec in specs:
            if spec.name in refused:
                raise topic_requests.replication_refused(
                    spec, asked[spec.name], await self._broker_count(), refused[spec.name]
                )

    async def _create_topics(self, specs: Sequence[TopicSpec], replication: Mapping[str, int]) -> dict[str, str | None]:
        """CreateTopics; returns the topics refused for their replication factor (with the broker's
        message) and raises TransportError for any other refusal."""
        new_topics = [topic_requests.new_topic(spec, replication[spec.name]) for spec in specs]
        try:
            response = await self._retried(lambda a: a.create_topics(new_topics))
        except kafka_errors.KafkaError as exc:
            raise TransportError(f"cannot create topics {[s.name for s in specs]}: {describe(exc)}") from exc
        refused: dict[str, str | None] = {}
        for entry in response.topic_errors:
            name, code = entry[0], entry[1]
            message = entry[2] if len(entry) > 2 else None
            if code in (0, kafka_errors.TopicAlreadyExistsError.errno):
                continue  # already exists: another worker won the race; counts are checked next
            if code == topic_requests.INVALID_REPLICATION_FACTOR or (
                code in topic_requests.REFUSED_DEFAULT_CODES and replication.get(name) == BROKER_DEFAULT
            ):
                refused[name] = message
                continue
            error = kafka_errors.for_code(code)
            raise TransportError(
                f"cannot create topic {name!r}: {error.__name__} (code {code})" + (f": {message}" if message else "")
            )
        return refused

    async def delete_records(self, before: Mapping[TP, int]) -> None:
        """DeleteRecords: every record of each partition below its offset (Kafka Streams' purge of
        consumed repartition records)."""
        if not before:
            return
        try:
            to_delete = {tp: RecordsToDelete(offset) for tp, offset in before.items()}
            # one try: a purge is best effort and the next purge interval asks again (retrying would hold
            # a refused purge, e.g. the dev broker's closed connection, for the whole request timeout)
            await (await self.client()).delete_records(to_delete)
        except kafka_errors.KafkaError as exc:
            raise TransportError(f"cannot delete records of {sorted(map(tuple, before))}: {describe(exc)}") from exc

    async def partition_count(self, topic: str) -> int | None:
        found = (await self._describe_topics([topic])).get(topic)
        return None if found is None else found[0]

    async def list_topics(self) -> list[str]:
        try:
            return sorted(await self._retried(lambda a: a.list_topics()))
        except kafka_errors.KafkaError as exc:
            raise TransportError(f"cannot list the topics: {describe(exc)}") from exc

    async def group_members(self, group_id: str) -> list[str]:
        """DescribeGroups: the member ids of a group that is neither Dead nor Empty."""
        try:
            described = await self._retried(lambda a: a.describe_consumer_groups([group_id]))
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
