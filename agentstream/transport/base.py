"""The small interface every transport implements: a producer, a consumer (group member or
manually assigned reader) and topic administration.

``kafka://`` wraps aiokafka; ``memory://`` is an in-process twin with the same partitioning,
offset and consumer-group semantics so the test harness never needs a broker. Messages are
:class:`~agentstream.transport.message.Message` (aiokafka's ConsumerRecord fields, compiled) on
both, so the worker's hot path never converts them.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypedDict, Unpack

from aiokafka.structs import RecordMetadata, TopicPartition

from ..exceptions import GroupFenced
from .message import Message

__all__ = [
    "TP",
    "Message",
    "RecordMetadata",
    "TopicSpec",
    "RebalanceListener",
    "Assignor",
    "MemberInfo",
    "Delivery",
    "Headers",
    "SendOptions",
    "Producer",
    "Consumer",
    "Transport",
]

if TYPE_CHECKING:
    # aiokafka ships no type information: describe its TopicPartition.

    class TP(NamedTuple):
        topic: str
        partition: int

else:
    TP = TopicPartition


@dataclass(frozen=True)
class TopicSpec:
    """A topic the app needs: created with these settings when missing.

    ``replication_factor`` None: the transport's default (the app's ``topic_replication_factor``);
    -1: the broker's default (KIP-464). ``config`` holds the topic configs set at creation
    (``cleanup.policy``, ``retention.ms``...)."""

    name: str
    partitions: int
    compacted: bool = False
    config: Mapping[str, str] = field(default_factory=dict)
    replication_factor: int | None = None


class RebalanceListener(Protocol):
    """Called by a group consumer around each rebalance (eager protocol: all revoked, then assigned)."""

    async def on_partitions_revoked(self, revoked: set[TP]) -> None: ...

    async def on_partitions_assigned(self, assigned: set[TP]) -> None: ...


@dataclass(frozen=True)
class MemberInfo:
    """What one group member told the group leader when it joined."""

    member_id: str
    topics: frozenset[str]
    user_data: bytes


class Assignor(Protocol):
    """Decides which member gets which partitions; runs on the group leader.

    ``assign`` returns per member the partitions and opaque bytes handed to that member's
    ``on_assignment`` (agentstream uses them for standby partitions and the owner map).
    """

    name: str

    def member_user_data(self) -> bytes: ...

    def assign(
        self, partitions_per_topic: Mapping[str, int], members: Sequence[MemberInfo]
    ) -> dict[str, tuple[list[TP], bytes]]: ...

    def on_assignment(self, partitions: list[TP], user_data: bytes) -> None: ...


class Delivery(Protocol):
    """What ``send`` returns: the record's delivery. ``asyncio.Future[RecordMetadata]`` fits; the
    Kafka producer returns a lighter view of its batch's future (one future per batch, not record)."""

    def done(self) -> bool: ...

    def cancelled(self) -> bool: ...

    def exception(self) -> BaseException | None: ...

    def result(self) -> RecordMetadata: ...

    def __await__(self) -> Generator[Any, None, RecordMetadata]: ...


Headers = Sequence[tuple[str, bytes]]
"""A record's headers: (name, value) pairs, in order, names may repeat."""


class SendOptions(TypedDict, total=False):
    """The optional per-record arguments of :meth:`Producer.send`, declared once: wrappers take
    and forward them as ``**options`` (the Kafka producer spells them out, see its ``send``)."""

    partition: int | None  # None: by key (Kafka's default partitioner), keyless records spread
    timestamp_ms: int | None  # None: the broker's time
    headers: Headers | None


class Producer(Protocol):
    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def send(
        self, topic: str, key: bytes | None, value: bytes | None, **options: Unpack[SendOptions]
    ) -> Delivery:
        """Append to the send buffer and return the delivery future (await it only to wait for the broker)."""
        ...

    def send_now(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        partition: int | None,
        timestamp_ms: int | None,
        headers: Headers | None,
    ) -> Delivery | None:
        """:meth:`send` without a coroutine when the producer can take the record at once (an
        open batch with room); None: nothing was appended, call :meth:`send`."""
        ...

    async def flush(self) -> None:
        """Wait until every record sent so far is acknowledged; raises ProducerError if any failed."""
        ...

    async def partitions_for(self, topic: str) -> int: ...

    async def fence(self, error: GroupFenced) -> None:
        """This member may have been fenced (its group membership lapsed): drop every record not
        yet acknowledged so none lands after the group moved on; flushes and sends raise ``error``
        until :meth:`unfence`."""
        ...

    async def unfence(self) -> None:
        """Rejoined: take sends again (a new connection and batch generation). No-op when not fenced."""
        ...

    # -- transactions (producers created with ``transport.producer(transactional_id=...)``) ------
    transactional_id: str | None
    """None for a plain producer; the transaction methods below need one."""

    async def begin_transaction(self) -> None: ...

    async def send_offsets_to_transaction(self, offsets: Mapping[TP, int], group_id: str) -> None:
        """Commit these consumer offsets of ``group_id`` if and only if the transaction commits."""
        ...

    async def commit_transaction(self) -> None:
        """Make every record and offset of the transaction visible at once (raises ProducerFenced
        when a newer producer with the same transactional_id exists)."""
        ...

    async def abort_transaction(self) -> None: ...


class Consumer(Protocol):
    async def start(self) -> None: ...

    async def stop(self) -> None:
        """Stop fetching; a group member leaves its group."""
        ...

    def subscribe(self, topics: Sequence[str], listener: RebalanceListener) -> None:
        """Join the consumer group for these topics (call before start)."""
        ...

    def assign(self, partitions: Sequence[TP]) -> None:
        """Read these partitions without a group (restore, standby, replies)."""
        ...

    def assignment(self) -> set[TP]: ...

    async def getmany(
        self, *partitions: TP, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[TP, list[Message]]:
        """Fetched records of the assigned partitions, or only of ``partitions`` when given."""
        ...

    def pause(self, *partitions: TP) -> None: ...

    def resume(self, *partitions: TP) -> None: ...

    def seek(self, partition: TP, offset: int) -> None: ...

    async def seek_to_beginning(self, *partitions: TP) -> None: ...

    async def position(self, partition: TP) -> int: ...

    def highwater(self, partition: TP) -> int | None:
        """The partition's end as last seen in a fetch response (None before the first fetch)."""
        ...

    def request_rejoin(self) -> None:
        """Ask the group for a rebalance (a probing rebalance: a warm-up replica caught up)."""
        ...

    def membership_deadline(self) -> float | None:
        """``time.monotonic()`` past which the group may have dropped this member: the send time of
        the last request the group coordinator answered for it (a heartbeat, the join, a commit)
        plus the session timeout. None when it is in no group (or the transport has no sessions)."""
        ...

    async def commit(self, offsets: Mapping[TP, int]) -> None: ...

    async def committed(self, partition: TP) -> int | None: ...


class Transport(Protocol):
    """Creates producers and consumers for one broker URL.

    ``producer(transactional_id="app-0_1")`` makes a transactional producer: starting it fences
    (and aborts the open transaction of) any older producer with the same id.
    ``consumer(isolation_level="read_committed")`` never returns records of open or aborted
    transactions, and its ``highwater`` is the last stable offset.
    """

    url: str

    def producer(self, **settings: Any) -> Producer: ...

    def consumer(self, *, group_id: str | None, assignor: Assignor | None = None, **settings: Any) -> Consumer: ...

    async def ensure_topics(self, specs: Sequence[TopicSpec]) -> dict[str, int]:
        """Create missing topics; return every topic's partition count.

        Raises :class:`~agentstream.exceptions.PartitionCountMismatch` when an existing topic's
        count differs from its spec.
        """
        ...

    async def partition_count(self, topic: str) -> int | None:
        """The topic's partition count, or None when it does not exist."""
        ...

    async def list_topics(self) -> list[str]:
        """Every topic on the broker, sorted (internal ones included), e.g. for topic patterns."""
        ...

    async def group_members(self, group_id: str) -> list[str]:
        """Member ids of the consumer group's live members (none when the group is empty or unknown)."""
        ...

    async def close(self) -> None: ...
