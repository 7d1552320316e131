"""``agentstream -A app dead-letters [replay]``: read the app's dead-letter topic and send chosen
records back to the topics they came from, once the bug that set them aside is fixed.

A dead letter names its source in KIP-1034's headers (``__streams.errors.topic`` / ``.partition`` /
``.offset``; agentstream's ``agentstream-source`` for letters written before those). A replay sends
the letter's key and value bytes unchanged, with its timestamp and its headers minus the error
headers, to the source topic (the key picks the partition, as for any producer). Headers and offsets come from outside the process: parsed with bounds, letters without a source
are listed as such and never replayed.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .error_handling import (
    EXCEPTION_HEADER,
    MESSAGE_HEADER,
    OFFSET_HEADER,
    PARTITION_HEADER,
    TOPIC_HEADER,
    strip_error_headers,
)
from .transport.base import TP

__all__ = ["DeadLetterRecord", "read_dead_letters", "replay"]

_SOURCE = re.compile(r"^(?P<topic>[A-Za-z0-9._-]{1,249})\[(?P<partition>\d{1,9})\]@(?P<offset>-?\d{1,19})$")
_MAX_TEXT = 2000  # characters of a header shown


@dataclass(frozen=True)
class DeadLetterRecord:
    """One record of the dead-letter topic: where it is, where it came from and why."""

    partition: int  # of the dead-letter topic
    offset: int  # of the dead-letter topic
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp_ms: int
    exception: str
    message: str
    source_topic: str  # "" when the letter does not say
    source_partition: int
    source_offset: int

    @property
    def source(self) -> str:
        return f"{self.source_topic}[{self.source_partition}]@{self.source_offset}" if self.source_topic else "?"

    def as_json(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "offset": self.offset,
            "exception": self.exception,
            "message": self.message,
            "source": self.source,
            "source_topic": self.source_topic,
            "source_partition": self.source_partition,
            "source_offset": self.source_offset,
        }


def _text(headers: dict[str, bytes], name: str) -> str:
    return headers.get(name, b"").decode("utf-8", "replace")[:_MAX_TEXT]


def _int(raw: str, low: int, high: int) -> int | None:
    if not re.fullmatch(r"-?\d{1,19}", raw):
        return None
    n = int(raw)
    return n if low <= n <= high else None


def parse(message: Any) -> DeadLetterRecord:
    """A consumed dead letter, its headers read with bounds (anything may be on that topic)."""
    headers = tuple((str(k), bytes(v or b"")) for k, v in (message.headers or ()))
    h = dict(headers)
    topic = _text(h, TOPIC_HEADER)
    partition = _int(_text(h, PARTITION_HEADER), 0, 2**31 - 1)
    offset = _int(_text(h, OFFSET_HEADER), -1, 2**63 - 1)
    if not topic or partition is None or offset is None:  # a letter from before KIP-1034's headers
        m = _SOURCE.match(_text(h, "agentstream-source"))
        topic, partition, offset = (m["topic"], int(m["partition"]), int(m["offset"])) if m else ("", -1, -1)
    if not re.fullmatch(r"[A-Za-z0-9._-]{1,249}", topic):
        topic, partition, offset = "", -1, -1
    exception = _text(h, EXCEPTION_HEADER)
    text = _text(h, MESSAGE_HEADER)
    if not exception and "agentstream-error" in h:
        exception, _, text = _text(h, "agentstream-error").partition(": ")
    return DeadLetterRecord(
        message.partition,
        message.offset,
        message.key,
        message.value,
        headers,
        message.timestamp_ms,
        exception,
        text,
        topic,
        -1 if partition is None else partition,
        -1 if offset is None else offset,
    )


async def read_dead_letters(app: Any, *, timeout: float = 30.0) -> list[DeadLetterRecord]:
    """Every record of the app's dead-letter topic, from each partition's start to its end now."""
    topic = app.settings.dead_letter_topic
    transport = app.transport
    count = await transport.partition_count(topic)
    if not count:
        return []
    tps = [TP(topic, p) for p in range(count)]
    consumer = transport.consumer(group_id=None, **app.consumer_settings())
    consumer.assign(tps)
    await consumer.start()
    out: list[DeadLetterRecord] = []
    try:
        await consumer.seek_to_beginning(*tps)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            batch = await consumer.getmany(timeout_ms=200)
            for messages in batch.values():
                out.extend(parse(m) for m in messages)
            ends = [consumer.highwater(tp) for tp in tps]
            if all(end is not None for end in ends):
                positions = [await consumer.position(tp) for tp in tps]
                if all(pos >= end for pos, end in zip(positions, ends, strict=True) if end is not None):
                    break
            if loop.time() > deadline:
                raise TimeoutError(f"could not read {topic} to its end within {timeout:.0f}s")
    finally:
        await consumer.stop()
    out.sort(key=lambda d: (d.partition, d.offset))
    return out


def choose(
    letters: Sequence[DeadLetterRecord],
    *,
    partition: int | None = None,
    first: int | None = None,
    last: int | None = None,
    source_topic: str | None = None,
) -> list[DeadLetterRecord]:
    """The letters in the dead-letter partition and offset range (inclusive) from ``source_topic``."""
    return [
        d
        for d in letters
        if (partition is None or d.partition == partition)
        and (first is None or d.offset >= first)
        and (last is None or d.offset <= last)
        and (source_topic is None or d.source_topic == source_topic)
    ]


async def replay(app: Any, letters: Sequence[DeadLetterRecord]) -> list[tuple[DeadLetterRecord, Any]]:
    """Send each letter back to its source topic (key, value unchanged; headers without the error
    headers, plus where it was replayed from); returns each letter with its delivery metadata.
    A letter without a source raises ValueError before anything is sent."""
    nowhere = [d for d in letters if not d.source_topic]
    if nowhere:
        raise ValueError(
            f"dead letters at {', '.join(f'{d.partition}@{d.offset}' for d in nowhere[:5])} do not say which topic "
            "they came from; choose others with --partition/--from/--to"
        )
    producer = await app.start_producer()
    sent = []
    for d in letters:
        headers = strip_error_headers(d.headers)
        delivery = await producer.send(
            d.source_topic,
            d.key,
            d.value,
            timestamp_ms=d.timestamp_ms if d.timestamp_ms >= 0 else None,
            headers=headers,
        )
        sent.append((d, delivery))
    await producer.flush()
    return [(d, delivery.result()) for d, delivery in sent]
