"""One exception tree for agentstream: catch :class:`AgentStreamError` to catch them all.

Every message says what went wrong *and* what to do about it, because most of these reach a
user at start-up or in a worker log, far from the line of code that caused them.
"""

from __future__ import annotations

from typing import TypeVar

_E = TypeVar("_E", bound=BaseException)


def caused(error: _E, cause: BaseException) -> _E:
    """``error`` with ``cause`` as its ``__cause__``: ``raise caused(E(...), exc)`` is ``raise E(...)
    from exc`` in compiled modules too (mypyc drops a raise statement's ``from``)."""
    error.__cause__ = cause
    return error


class AgentStreamError(Exception):
    """Root of every error agentstream raises on purpose."""


class ConfigError(AgentStreamError):
    """A setting has a value agentstream cannot use; the message names the setting and the fix."""

    def __init__(self, setting: str, problem: str, fix: str) -> None:
        self.setting = setting
        self.problem = problem
        self.fix = fix
        super().__init__(f"setting {setting!r}: {problem}. Fix: {fix}")


class TopologyError(AgentStreamError):
    """The agents, topics and tables declared by the app do not form a topology that can run."""


class PartitionCountMismatch(TopologyError):
    """An existing topic's partition count differs from what the app declares."""

    def __init__(self, topic: str, existing: int, wanted: int) -> None:
        self.topic = topic
        self.existing = existing
        self.wanted = wanted
        super().__init__(
            f"topic {topic!r} exists with {existing} partitions but the app declares {wanted}. "
            f"Fix: declare app.topic({topic!r}, partitions={existing}) (or set topic_partitions={existing}), "
            f"or delete and recreate the topic with {wanted} partitions."
        )


class SerializationError(AgentStreamError):
    """A key or value could not be encoded or decoded."""


class DecodeError(SerializationError):
    """A record's key or value bytes could not be decoded (Faust's ``DecodeError``)."""


class KeyDecodeError(DecodeError):
    """A record's key bytes could not be decoded with the topic's key codec."""


class ValueDecodeError(DecodeError):
    """A record's value bytes could not be decoded with the topic's value codec."""


class ValidationError(SerializationError, ValueError):
    """Data does not fit a Record's declared fields; ``field`` names the offending field and
    ``reason`` (Faust's attribute) the problem."""

    def __init__(self, model: str, field: str, problem: str) -> None:
        self.model = model
        self.field = field
        self.reason = problem
        super().__init__(f"{model}.{field}: {problem}")


class TransportError(AgentStreamError):
    """The broker (or the memory transport) refused or failed an operation."""


class ProducerError(TransportError):
    """A record could not be delivered; offsets past it are not committed."""


class RecordRejected(ProducerError):
    """A record refused for good when it is sent (too large, a partition the topic does not have):
    sending it again cannot succeed. The app's ``production_exception_handler`` decides."""


class CommitFailed(TransportError):
    """Offsets were not committed (the group rebalanced, or the coordinator was unreachable).

    Nothing is lost under at_least_once: the records are handled again by whoever owns the
    partitions next, and the next commit carries newer offsets anyway.
    """


class GroupFenced(CommitFailed):
    """The group moved on without this member (its generation is fenced: IllegalGeneration,
    UnknownMemberId, RebalanceInProgress): its partitions may already belong to another member.

    Kafka Streams' TaskMigratedException: the worker's tasks close dirty (nothing more of theirs
    is committed or written) and it rejoins the group; their records are handled by the new owner.
    """


class MembershipLapsed(GroupFenced):
    """No request of this member was answered by the group coordinator for about a session
    timeout: the group may have dropped it and given its partitions to another member.

    Raised by the worker itself (:mod:`agentstream.worker.fencing`) before the broker can tell:
    its unacknowledged writes are dropped so none lands after the new owner's, its tasks close
    dirty, and it rejoins.
    """


class ProducerFenced(ProducerError):
    """A newer producer with the same ``transactional_id`` exists: this one is a zombie.

    Its open transaction was aborted by the broker; its task now belongs to someone else, so the
    only safe move is to stop processing that task and drop its uncommitted state.
    """


class TransactionsUnsupported(ConfigError):
    """``processing_guarantee='exactly_once'`` but the broker cannot run Kafka transactions."""

    def __init__(self, broker: str, problem: str) -> None:
        super().__init__(
            "processing_guarantee",
            f"'exactly_once' needs Kafka transactions, but the broker at {broker} refused them ({problem})",
            "use a broker with transactions (Apache Kafka >= 2.5, Redpanda) or set "
            "processing_guarantee='at_least_once' (AGENTSTREAM_PROCESSING_GUARANTEE=at_least_once)",
        )


class ImproperlyConfigured(ConfigError):
    """Alias kept for Faust users who catch this name."""


class AgentError(AgentStreamError):
    """An agent raised and the app's policy is ``stop``."""


class WorkerStopped(AgentStreamError):
    """Raised inside a stream when the worker is shutting down the task that feeds it."""


class StoreError(AgentStreamError):
    """A table's local state store failed; ``path`` names the store directory (None for memory)."""

    def __init__(self, path: object, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"state store {str(path)!r}: {problem}")


class StoreCorrupt(StoreError):
    """The store's files are damaged; wipe it (``store.wipe()``) and restore from the changelog."""


class StoreUnavailable(StoreError):
    """The store cannot be used right now (closed, or locked by another process); do NOT wipe it."""


class StopProcessing(AgentStreamError):
    """A record failed and the app's policy is ``stop``: the worker stops without committing it."""


class RestoreTimeout(AgentStreamError):
    """A table restore made no progress for ``restore_timeout`` seconds (broker unreachable or stuck)."""

    def __init__(self, label: str, timeout: float, where: str) -> None:
        self.label = label
        self.timeout = timeout
        super().__init__(
            f"{label}: restore made no progress for {timeout:g}s ({where}). Fix: check that the broker is "
            "reachable and serves the changelog topics, or raise restore_timeout (AGENTSTREAM_RESTORE_TIMEOUT)"
        )


# -- Faust's exception names that are agentstream's own classes -------------------------------------------------------
class Predicate(AgentStreamError):
    """An outcome signalled by raising, not a failure (Faust's ``FaustPredicate``)."""


class Skip(Predicate):
    """Raised by a stream processor (``stream.add_processor``) to drop the current value: the
    record is acknowledged and the agent never sees it (Faust's ``Skip``)."""


class NotReady(TransportError, Predicate):
    """A client was used before it started (Faust's ``NotReady``)."""


class SameNode(Predicate):
    """The key's owner is this worker, so a request is answered locally instead of routed
    (Faust's router raises it; agentstream's router answers locally and never lets it escape)."""


class ConsistencyError(StoreError):
    """A table's checkpoint is ahead of its changelog's end. agentstream does not raise it: it
    wipes that store partition and restores it from the changelog instead (Faust stops the worker)."""
