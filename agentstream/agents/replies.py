"""Request/reply for ``agent.ask``: requests carry a reply topic and a correlation id in their
headers; the agent's yielded value goes back to that topic; a reader per app resolves futures."""

from __future__ import annotations

import asyncio
import fnmatch
import logging
import re
import time
from typing import TYPE_CHECKING, Any

from ..ids import new_id
from ..transport.base import TP, Consumer, TopicSpec

if TYPE_CHECKING:
    from ..types import AppT as App  # the App's interface: app.py imports this module

log = logging.getLogger(__name__)

# Faust's header names (use_reply_headers), so requests read the same under either framework.
REPLY_TO = "Faust-Ag-ReplyTo"
CORRELATION_ID = "Faust-Ag-CorrelationId"

__all__ = ["REPLY_TO", "CORRELATION_ID", "ReplyConsumer", "allowed_reply_to", "reply_topic_allowed"]

_TOPIC_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
MAX_CORRELATION_ID = 256
"""Longest correlation id a reply may carry (ours are 32 hex characters)."""
_REFUSAL_LOG_INTERVAL = 10.0
MAX_UNANSWERED_PROMISES = 10_000
"""ask_nowait() promises this process waits on at once (see ReplyConsumer.expect_promise)."""
_last_refusal: dict[str, float] = {}


def reply_topic_allowed(app: App, topic: str) -> bool:
    """Whether a ``Faust-Ag-ReplyTo`` header may name ``topic``.

    The header comes from whoever wrote the request record, so it is input, not configuration:
    a reply may go only to this app's own reply topics (``<app id>-replies-<12 hex>``, what
    ``agent.ask`` creates) or to a topic matching the ``reply_topics`` setting's patterns, and
    never to a table's changelog (a reply there corrupts the table and its restores)."""
    if not _TOPIC_NAME.match(topic):
        return False
    if any(topic == t.changelog_topic.name for t in app.tables.values()):
        return False
    if re.fullmatch(re.escape(app.settings.id) + r"-replies-[0-9a-f]{12}", topic):
        return True
    extra = app.settings.extra
    if topic == extra.get("reply_to") or (  # Faust's reply_to / reply_to_prefix settings name the app's own
        extra.get("reply_to_prefix") and re.fullmatch(re.escape(extra["reply_to_prefix"]) + r"[0-9a-f]{32}", topic)
    ):
        return True
    patterns = [p.strip() for p in app.settings.reply_topics.split(",") if p.strip()]
    return any(fnmatch.fnmatchcase(topic, p) for p in patterns)


def allowed_reply_to(app: App, event: Any) -> bytes | None:
    """The event's reply-to header when replies may go there, else None (logged, rate-limited)."""
    raw = event.header(REPLY_TO)
    if raw is None:
        return None
    try:
        topic = raw.decode("utf-8")
    except (UnicodeDecodeError, AttributeError):
        topic = repr(raw)[:120]
    else:
        if reply_topic_allowed(app, topic):
            return raw  # type: ignore[no-any-return]
    now = time.monotonic()
    if now - _last_refusal.get(topic, 0.0) >= _REFUSAL_LOG_INTERVAL:
        _last_refusal[topic] = now
        if len(_last_refusal) > 1000:
            _last_refusal.clear()
        where = f"{getattr(event, 'topic', '?')}[{getattr(event, 'partition', '?')}]@{getattr(event, 'offset', '?')}"
        log.warning(
            "reply not sent: the %s header of %s names %r, which is not a reply topic of app %r "
            "(allow more with the reply_topics setting)",
            REPLY_TO,
            where,
            topic,
            app.settings.id,
        )
    return None


def correlation_id(headers: Any) -> str | None:
    """The reply's correlation id: the first ``Faust-Ag-CorrelationId`` header when it is
    non-empty UTF-8 of at most :data:`MAX_CORRELATION_ID` bytes, else None."""
    for item in headers or ():
        try:
            name, value = item
        except (TypeError, ValueError):
            continue
        if name != CORRELATION_ID:
            continue
        if not isinstance(value, (bytes, bytearray)) or not 0 < len(value) <= MAX_CORRELATION_ID:
            return None
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return None
    return None


def reply_topic_name(app: App) -> str:
    """This process's reply topic: Faust's ``reply_to`` setting when given, else Faust's
    ``reply_to_prefix`` and a random hex id when that is given, else ``<app id>-replies-<12 hex>``."""
    extra = app.settings.extra
    if extra.get("reply_to"):
        return str(extra["reply_to"])
    if extra.get("reply_to_prefix"):
        return f"{extra['reply_to_prefix']}{new_id(app)}"
    return f"{app.settings.id}-replies-{new_id(app)[:12]}"  # seeded in the harness: see ids.py


def reply_topic_config(app: App) -> dict[str, str]:
    """Faust's ``reply_expires``: the reply topic keeps replies this long (given: its value)."""
    expires = app.settings.extra.get("reply_expires")
    return {} if expires is None else {"retention.ms": str(int(float(expires) * 1000))}


class ReplyConsumer:
    """Owns this process's reply topic and the futures of outstanding asks."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.topic_name = reply_topic_name(app)
        self._futures: dict[str, asyncio.Future[Any]] = {}
        self.bad_replies = 0  # replies skipped: no usable correlation id (counted, warned rate-limited)
        self._last_bad_warning = float("-inf")
        self._promises: dict[str, None] = {}  # ask_nowait's correlation ids, oldest first
        self.promises_dropped = 0
        self._last_drop_warning = float("-inf")
        self._consumer: Consumer | None = None
        self._reader: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        async with self._lock:
            if self._reader is not None:
                return
            transport = self.app.transport
            await transport.ensure_topics([TopicSpec(self.topic_name, 1, config=reply_topic_config(self.app))])
            consumer = transport.consumer(group_id=None, **self.app.consumer_settings())
            consumer.assign([TP(self.topic_name, 0)])
            await consumer.start()
            await consumer.seek_to_beginning(TP(self.topic_name, 0))
            self._consumer = consumer
            self._reader = asyncio.ensure_future(self._read())

    def expect(self) -> tuple[str, asyncio.Future[Any]]:
        correlation_id = new_id(self.app)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._futures[correlation_id] = fut
        return correlation_id, fut

    def expect_promise(self, correlation_id: str, fut: asyncio.Future[Any]) -> None:
        """Resolve ``fut`` with the reply carrying ``correlation_id`` (``agent.ask_nowait``).

        Nothing bounds how long a promise waits (no timeout, and its caller may have dropped
        it), so at most :data:`MAX_UNANSWERED_PROMISES` wait at once: beyond, the oldest fails
        with TimeoutError (counted in :attr:`promises_dropped`, with a warning) and is forgotten.
        One done otherwise (cancelled by its caller) is forgotten at once."""
        self._futures[correlation_id] = fut
        promises = self._promises
        promises.pop(correlation_id, None)
        promises[correlation_id] = None

        def forget(done: asyncio.Future[Any], cid: str = correlation_id) -> None:
            if self._futures.get(cid) is done:
                del self._futures[cid]
            if self._futures.get(cid) is None:
                promises.pop(cid, None)

        fut.add_done_callback(forget)
        while len(promises) > MAX_UNANSWERED_PROMISES:
            oldest = next(iter(promises))
            del promises[oldest]
            dropped = self._futures.pop(oldest, None)
            if dropped is None or dropped.done():
                continue
            self.promises_dropped += 1
            dropped.set_exception(
                TimeoutError(
                    f"no reply to request {oldest!r} while {MAX_UNANSWERED_PROMISES} later ask_nowait() "
                    "requests were sent; the promise is dropped"
                )
            )
            now = time.monotonic()
            if now - self._last_drop_warning >= _REFUSAL_LOG_INTERVAL:
                self._last_drop_warning = now
                log.warning(
                    "%d ask_nowait() promises dropped unanswered so far: more than %d waited at once "
                    "(replies not coming, or promises never awaited)",
                    self.promises_dropped,
                    MAX_UNANSWERED_PROMISES,
                )

    def forget(self, correlation_id: str) -> None:
        self._futures.pop(correlation_id, None)

    async def _read(self) -> None:
        """Resolve the futures the replies answer. Replies come from whoever can produce to an
        agent's input (agents copy the request's correlation header), so one that cannot be read
        is skipped and counted; the reader itself never stops on a reply."""
        assert self._consumer is not None
        while True:
            batches = await self._consumer.getmany(timeout_ms=500)
            for messages in batches.values():
                for message in messages:
                    self._resolve(message)

    def _resolve(self, message: Any) -> None:
        sensors = self.app.sensors
        if sensors:  # a tracing sensor's reply span, under the replying agent's
            sensors.on_reply_received(TP(message.topic, message.partition), message.offset, message)
        cid = correlation_id(message.headers)
        if cid is None:
            self._bad_reply(message)
            return
        fut = self._futures.pop(cid, None)
        if fut is None or fut.done():
            return
        try:
            fut.set_result(None if message.value is None else self.app.reply_codec.loads(message.value))
        except Exception as exc:  # a reply we cannot decode fails that ask, not the reader
            fut.set_exception(exc)

    def _bad_reply(self, message: Any) -> None:
        self.bad_replies += 1
        now = time.monotonic()
        if now - self._last_bad_warning >= _REFUSAL_LOG_INTERVAL:
            self._last_bad_warning = now
            log.warning(
                "skipped reply %s[%s]@%s: its %s header is missing, empty, longer than %d bytes or not "
                "UTF-8 (%d such replies skipped so far)",
                getattr(message, "topic", "?"),
                getattr(message, "partition", "?"),
                getattr(message, "offset", "?"),
                CORRELATION_ID,
                MAX_CORRELATION_ID,
                self.bad_replies,
            )

    async def stop(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            try:
                await self._reader
            except (asyncio.CancelledError, Exception):
                pass
            self._reader = None
        if self._consumer is not None:
            await self._consumer.stop()
            self._consumer = None
        for fut in list(self._futures.values()):
            if not fut.done():
                fut.cancel()
        self._futures.clear()
        self._promises.clear()
