"""What happens to a record that fails to decode or makes its agent raise: the app's
``processing_exception_handler`` (:mod:`agentstream.error_handling`), else its policy.

``skip`` / ``continue`` logs and goes on; ``dead-letter`` logs, copies the raw record (with
KIP-1034's error headers) to the dead-letter topic, and goes on; ``stop`` / ``fail`` logs and stops
the worker without committing the record, so it is handled again after the fix. Every log line
names topic[partition]@offset.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable
from typing import Any

from ..error_handling import (
    ErrorAnswer,
    ErrorContext,
    HandlerFailed,
    answer_of,
    ask_handler,
    send_dead_letter,
)
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


def _context(
    stage: str, exc: Exception, message: Message, task: RunningTask, event: Event | None = None, attempts: int = 1
) -> ErrorContext:
    return ErrorContext(
        stage=stage,
        exception=exc,
        topic=message.topic,
        partition=message.partition,
        offset=message.offset,
        raw_key=message.key,
        raw_value=message.value,
        headers=tuple(message.headers or ()),
        key=event.key if event is not None else None,
        value=event.value if event is not None else None,
        agent=task.agent.name,
        attempts=attempts,
        timestamp_ms=message.timestamp_ms,
    )


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
        self.handler: Callable[[ErrorContext], Any] | None = app.settings.processing_exception_handler
        self.answered: dict[str, int] = {a.value: 0 for a in ErrorAnswer}  # the handler's answers

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
        ctx = _context("decode", exc, message, task)
        answer = await self._decide(self.on_decode_error, ctx)
        log.error(
            "cannot decode record %s for agent %s (task %s): %s: %s; %s",
            _where(message),
            task.agent.name,
            task.id,
            type(exc).__name__,
            exc,
            self._said(self.on_decode_error, answer, "on_decode_error"),
        )
        await self._apply(answer, ctx, task)

    async def agent_failed(self, task: RunningTask, event: Event | None, exc: Exception, attempts: int = 1) -> None:
        self.agent_errors += 1
        where = _where(event.message) if event is not None else "(no record in hand)"
        if event is None:
            answer = answer_of(self.on_agent_error)
            if answer is ErrorAnswer.DEAD_LETTER:
                answer = ErrorAnswer.CONTINUE  # no record to set aside
        else:
            ctx = _context("agent", exc, event.message, task, event, attempts)
            answer = await self._decide(self.on_agent_error, ctx)
        log.error(
            "agent %s raised on record %s (task %s%s): %s: %s; %s\n%s",
            task.agent.name,
            where,
            task.id,
            f", attempt {attempts}" if attempts > 1 else "",
            type(exc).__name__,
            exc,
            self._said(self.on_agent_error, answer, "on_agent_error"),
            "".join(traceback.format_exception(exc)).rstrip(),
        )
        if event is None:
            if answer is ErrorAnswer.FAIL:
                raise StopProcessing(f"agent {task.agent.name} raised {exc!r}") from exc
            return
        await self._apply(answer, ctx, task)

    async def _decide(self, policy: str, ctx: ErrorContext) -> ErrorAnswer:
        """The processing_exception_handler's answer, else the policy setting's."""
        handler = self.handler
        if handler is not None:
            try:
                answer = await ask_handler(handler, ctx, "processing_exception_handler")
            except HandlerFailed as failed:
                raise StopProcessing(f"record {ctx.source} failed ({ctx.stage}: {ctx.exception!r}) and {failed}") from (
                    ctx.exception
                )
            if answer is not None:
                self.answered[answer.value] += 1
                return answer
        return answer_of(policy)

    def _said(self, policy: str, answer: ErrorAnswer, setting: str) -> str:
        if self.handler is not None and answer is not answer_of(policy):
            return f"processing_exception_handler answered {answer.value}"
        return f"policy {setting}={policy}"

    async def _apply(self, answer: ErrorAnswer, ctx: ErrorContext, task: RunningTask) -> None:
        if answer is ErrorAnswer.FAIL:
            raise StopProcessing(
                f"record {ctx.source} failed ({ctx.stage}: {ctx.exception!r}) and the answer is 'fail' "
                f"(policy 'stop'); fix the cause or set on_{ctx.stage}_error='skip' or 'dead-letter' "
                "(or answer otherwise in processing_exception_handler), then restart the worker"
            ) from ctx.exception
        if answer is ErrorAnswer.DEAD_LETTER:
            await send_dead_letter(self.app, ctx, task)
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
