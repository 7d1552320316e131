"""What happens to a record that fails to decode or makes its agent raise: the app's policy.

``skip`` logs and goes on; ``dead-letter`` logs, copies the raw record (with the error in its
headers) to the dead-letter topic, and goes on; ``stop`` logs and stops the worker without
committing the record, so it is handled again after the fix. Every log line names
topic[partition]@offset.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable
from typing import Any

from ..events import Event
from ..exceptions import KeyDecodeError, SerializationError, StopProcessing, caused
from ..runtime import RunningTask  # what the policy names and sends through: a task's id, agent, transaction
from ..transport.base import Message

log = logging.getLogger("agentstream.errors")

__all__ = ["ErrorPolicy", "decode_error"]


def decode_error(exc: Exception, kind: type[SerializationError]) -> Exception:
    """``exc`` as the side's error (KeyDecodeError or ValueDecodeError, as Faust's hooks get it):
    a codec does not know which side it decodes."""
    return exc if isinstance(exc, kind) else caused(kind(str(exc) or type(exc).__name__), exc)


def _source_topic(task: RunningTask, name: str) -> Any:
    subtopology = getattr(task, "subtopology", None)
    for topic in getattr(subtopology, "source_topic_objects", ()):
        if topic.name == name:
            return topic
    return None


def _where(message: Message) -> str:
    return f"{message.topic}[{message.partition}]@{message.offset}"


class ErrorPolicy:
    """Applies ``on_decode_error`` / ``on_agent_error``; counts what it did for /status."""

    def __init__(
        self,
        app: Any,
        on_crash: Callable[[BaseException], None],
        on_fenced: Callable[[BaseException], None] | None = None,
    ) -> None:
        self.app = app
        self._on_fenced = on_fenced
        self.on_decode_error = app.settings.on_decode_error
        self.on_agent_error = app.settings.on_agent_error
        self._on_crash = on_crash
        self.decode_errors = 0
        self.agent_errors = 0
        self.dead_lettered = 0

    async def decode_failed(self, task: RunningTask, message: Message, exc: Exception) -> None:
        self.decode_errors += 1
        topic = _source_topic(task, message.topic)
        if topic is not None:  # Faust's hooks first: one that returns has handled (skipped) the record
            hook = topic.on_key_decode_error if isinstance(exc, KeyDecodeError) else topic.on_value_decode_error
            try:
                await hook(exc, message)
            except Exception as raised:  # the default hook hands the error on; an override may raise another
                exc = raised
            else:
                log.info(
                    "record %s did not decode (%s: %s); handled by %r", _where(message), type(exc).__name__, exc, hook
                )
                return
        policy = self.on_decode_error
        log.error(
            "cannot decode record %s for agent %s (task %s): %s: %s; policy on_decode_error=%s",
            _where(message),
            task.agent.name,
            task.id,
            type(exc).__name__,
            exc,
            policy,
        )
        await self._apply(policy, message, exc, "decode", task)

    async def agent_failed(self, task: RunningTask, event: Event | None, exc: Exception) -> None:
        self.agent_errors += 1
        policy = self.on_agent_error
        where = _where(event.message) if event is not None else "(no record in hand)"
        log.error(
            "agent %s raised on record %s (task %s): %s: %s; policy on_agent_error=%s\n%s",
            task.agent.name,
            where,
            task.id,
            type(exc).__name__,
            exc,
            policy,
            "".join(traceback.format_exception(exc)).rstrip(),
        )
        if event is None:
            if policy == "stop":
                raise StopProcessing(f"agent {task.agent.name} raised {exc!r}") from exc
            return
        await self._apply(policy, event.message, exc, "agent", task)

    async def _apply(self, policy: str, message: Message, exc: Exception, stage: str, task: RunningTask) -> None:
        if policy == "stop":
            raise StopProcessing(
                f"record {_where(message)} failed ({stage}: {exc!r}) and the policy is 'stop'; "
                f"fix the cause or set on_{stage}_error='skip' or 'dead-letter', then restart the worker"
            ) from exc
        if policy == "dead-letter":
            headers = list(message.headers or ()) + [
                ("agentstream-error", f"{type(exc).__name__}: {exc}".encode()[:4096]),
                ("agentstream-error-stage", stage.encode()),
                ("agentstream-source", _where(message).encode()),
            ]
            # exactly_once: in the task's transaction, with the offset that skips the record
            producer = task.txn if task.txn is not None else await self.app.start_producer()
            await producer.send(
                self.app.settings.dead_letter_topic,
                message.key,
                message.value,
                timestamp_ms=message.timestamp_ms if message.timestamp_ms >= 0 else None,
                headers=headers,
            )
            self.dead_lettered += 1

    def task_fenced(self, task: RunningTask, exc: BaseException) -> None:
        """exactly_once: the task's producer was fenced by the task's next owner (ProducerFenced)."""
        log.warning("task %s (agent %s) was fenced: %s", task.id, task.agent.name, exc)
        if self._on_fenced is not None:
            self._on_fenced(exc)
        else:
            self._on_crash(exc)

    def task_crashed(self, task: RunningTask, exc: BaseException) -> None:
        log.critical("task %s (agent %s) stopped: %s", task.id, task.agent.name, exc)
        self._on_crash(exc)
