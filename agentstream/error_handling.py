"""The app's exception handlers, as Kafka Streams 4 has them (KIP-1033, KIP-1034).

``App(processing_exception_handler=fn)`` is asked about a record that failed to decode or made its
agent raise; ``App(production_exception_handler=fn)`` about a send that failed for good (a value
that cannot be serialised, a record too large, a topic the app may not write). Each gets an
:class:`ErrorContext` and answers with an :class:`ErrorAnswer` (or its string): ``continue`` (go
on without the record or the send), ``fail`` (stop the worker, nothing committed past the record)
or ``dead-letter`` (copy the source record to the dead-letter topic, then go on). ``None`` leaves
the record to the policy setting (``on_decode_error`` / ``on_agent_error``; ``fail`` for sends).

A dead letter keeps the source record's key, value and headers byte for byte and adds KIP-1034's
``__streams.errors.*`` headers (tools written for Kafka Streams read them) and agentstream's own
``agentstream-error*`` headers (read by ``AppHarness.dead_letters()`` and older tools).
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import logging
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from .events import current_event
from .exceptions import StopProcessing
from .runtime import current_task

log = logging.getLogger("agentstream.errors")

__all__ = [
    "AGENTSTREAM_ERROR_HEADERS",
    "ERROR_HEADERS",
    "ErrorAnswer",
    "ErrorContext",
    "ask_handler",
    "dead_letter_headers",
    "production_failed",
    "send_dead_letter",
    "strip_error_headers",
]

# KIP-1034's header names (org.apache.kafka.streams.errors.ExceptionHandlerUtils)
EXCEPTION_HEADER = "__streams.errors.exception"
MESSAGE_HEADER = "__streams.errors.message"
STACKTRACE_HEADER = "__streams.errors.stacktrace"
TOPIC_HEADER = "__streams.errors.topic"
PARTITION_HEADER = "__streams.errors.partition"
OFFSET_HEADER = "__streams.errors.offset"
ERROR_HEADERS = (
    EXCEPTION_HEADER,
    MESSAGE_HEADER,
    STACKTRACE_HEADER,
    TOPIC_HEADER,
    PARTITION_HEADER,
    OFFSET_HEADER,
)
# agentstream's own (since the first dead-letter policy): "Type: message", the stage, topic[partition]@offset
AGENTSTREAM_ERROR_HEADERS = ("agentstream-error", "agentstream-error-stage", "agentstream-source")
MAX_HEADER_BYTES = 16384  # a stack trace or message longer than this is cut (a record has a size limit)


class ErrorAnswer(enum.StrEnum):
    """What a handler says about a failed record or send."""

    CONTINUE = "continue"  # go on without it (the policy name ``skip``)
    FAIL = "fail"  # stop the worker without committing past the record (``stop``)
    DEAD_LETTER = "dead-letter"  # copy the source record to the dead-letter topic and go on


_BY_POLICY = {"skip": ErrorAnswer.CONTINUE, "stop": ErrorAnswer.FAIL, "dead-letter": ErrorAnswer.DEAD_LETTER}


@dataclass
class ErrorContext:
    """Everything known about a failure when the handler is asked.

    ``stage``: ``"decode"`` (the record's key or value did not decode), ``"agent"`` (the agent
    raised on it) or ``"produce"`` (a send failed for good). ``topic`` / ``partition`` / ``offset`` /
    ``raw_key`` / ``raw_value`` / ``headers`` describe the *source* record being processed (offset -1
    and empty bytes when a send happened outside any record, e.g. in a timer); ``key`` / ``value``
    are its decoded forms when decoding got that far (else None). For ``produce``, ``sink_topic``,
    ``sink_key`` and ``sink_value`` say what was being sent. ``attempts``: how many times the agent
    ran on the record (more than one after ``agent_retries``)."""

    stage: str
    exception: BaseException
    topic: str = ""
    partition: int = -1
    offset: int = -1
    raw_key: bytes | None = None
    raw_value: bytes | None = None
    headers: tuple[tuple[str, bytes], ...] = ()
    key: Any = None
    value: Any = None
    agent: str = ""
    attempts: int = 1
    sink_topic: str = ""
    sink_key: Any = None
    sink_value: Any = None
    timestamp_ms: int = -1
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def source(self) -> str:
        """``topic[partition]@offset``, as the logs write it."""
        return f"{self.topic}[{self.partition}]@{self.offset}"


def answer_of(policy: str) -> ErrorAnswer:
    """The answer a policy name gives."""
    return _BY_POLICY[policy]


class HandlerFailed(Exception):
    """The handler raised or gave an answer that is not one (the record then fails)."""


async def ask_handler(handler: Callable[[ErrorContext], Any], ctx: ErrorContext, setting: str) -> ErrorAnswer | None:
    """The handler's answer (it may be a coroutine function); None when it leaves the record to the
    policy. A handler that raises or answers something else raises :class:`HandlerFailed`, naming it,
    and the record fails (Kafka Streams does the same: a broken handler must not drop records)."""
    try:
        result = handler(ctx)
        if inspect.isawaitable(result):
            result = await _awaited(result)
    except Exception as exc:
        raise HandlerFailed(f"{setting} {handler!r} raised {type(exc).__name__}: {exc}") from exc
    if result is None:
        return None
    try:
        return ErrorAnswer(result)
    except ValueError:
        raise HandlerFailed(
            f"{setting} {handler!r} answered {result!r}; answer ErrorAnswer.CONTINUE, .FAIL or .DEAD_LETTER "
            "('continue', 'fail', 'dead-letter'), or None for the policy setting"
        ) from None


async def _awaited(result: Awaitable[Any]) -> Any:
    return await result


def _cut(text: str) -> bytes:
    return text.encode("utf-8", "replace")[:MAX_HEADER_BYTES]


def dead_letter_headers(ctx: ErrorContext) -> list[tuple[str, bytes]]:
    """The source record's own headers, then KIP-1034's and agentstream's error headers."""
    exc = ctx.exception
    return [
        *strip_error_headers(ctx.headers),
        (EXCEPTION_HEADER, _cut(f"{type(exc).__module__}.{type(exc).__qualname__}")),
        (MESSAGE_HEADER, _cut(str(exc))),
        (STACKTRACE_HEADER, _cut("".join(traceback.format_exception(exc)))),
        (TOPIC_HEADER, _cut(ctx.topic)),
        (PARTITION_HEADER, str(ctx.partition).encode()),
        (OFFSET_HEADER, str(ctx.offset).encode()),
        ("agentstream-error", _cut(f"{type(exc).__name__}: {exc}")[:4096]),
        ("agentstream-error-stage", ctx.stage.encode()),
        ("agentstream-source", _cut(ctx.source)),
    ]


def strip_error_headers(headers: Any) -> list[tuple[str, bytes]]:
    """``headers`` without the error headers a dead letter adds (what a replay sends back)."""
    drop = set(ERROR_HEADERS) | set(AGENTSTREAM_ERROR_HEADERS)
    return [(k, v) for k, v in (headers or ()) if k not in drop]


async def send_dead_letter(app: Any, ctx: ErrorContext, task: Any = None) -> None:
    """Copy the source record (key and value bytes unchanged) to the app's dead-letter topic with
    the error headers; under exactly_once in the task's transaction, with the offset that skips it."""
    task = task if task is not None else current_task.get()
    txn = getattr(task, "txn", None) if task is not None else None
    producer = txn if txn is not None else await app.start_producer()
    await producer.send(
        app.settings.dead_letter_topic,
        ctx.raw_key,
        ctx.raw_value,
        timestamp_ms=ctx.timestamp_ms if ctx.timestamp_ms >= 0 else None,
        headers=dead_letter_headers(ctx),
    )


async def production_failed(app: Any, exc: Exception, sink_topic: str, key: Any, value: Any) -> Any:
    """A send to ``sink_topic`` failed for good: what the app's ``production_exception_handler``
    answers. Returns a resolved delivery (result None) for ``continue`` and ``dead-letter``; raises
    :class:`StopProcessing` for ``fail`` (the worker stops, nothing committed past the record);
    re-raises ``exc`` when there is no handler or it answers None (the error goes where it went
    without one: an agent's error policy for a value that does not serialise, a stop for the rest)."""
    handler = app.settings.production_exception_handler
    if handler is None:
        raise exc
    event = current_event()
    task = current_task.get()
    message = event.message if event is not None else None
    ctx = ErrorContext(
        stage="produce",
        exception=exc,
        topic=message.topic if message is not None else "",
        partition=message.partition if message is not None else -1,
        offset=message.offset if message is not None else -1,
        raw_key=message.key if message is not None else None,
        raw_value=message.value if message is not None else None,
        headers=tuple(message.headers or ()) if message is not None else (),
        key=event.key if event is not None else None,
        value=event.value if event is not None else None,
        agent=getattr(getattr(task, "agent", None), "name", "") if task is not None else "",
        sink_topic=sink_topic,
        sink_key=key,
        sink_value=value,
        timestamp_ms=message.timestamp_ms if message is not None else -1,
    )
    try:
        answer = await ask_handler(handler, ctx, "production_exception_handler")
    except HandlerFailed as failed:
        raise StopProcessing(f"send to {sink_topic} failed ({exc!r}) and {failed}") from exc
    if answer is None:
        raise exc
    log.error(
        "send to %s failed while handling %s: %s: %s; production_exception_handler answered %s",
        sink_topic,
        ctx.source,
        type(exc).__name__,
        exc,
        answer.value,
    )
    if answer is ErrorAnswer.FAIL:
        raise StopProcessing(
            f"send to {sink_topic} failed ({type(exc).__name__}: {exc}) while handling {ctx.source}; "
            "production_exception_handler answered fail: the worker stops without committing the record"
        ) from exc
    if answer is ErrorAnswer.DEAD_LETTER:
        if message is None:
            raise StopProcessing(
                f"send to {sink_topic} failed ({type(exc).__name__}: {exc}) outside a record (a timer or task), "
                "and production_exception_handler answered dead-letter: there is no source record to set aside"
            ) from exc
        await send_dead_letter(app, ctx)
    done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    done.set_result(None)
    return done
