"""Faust's ``stream_publish_on_commit=True``: what an agent sends while it handles a record is held
back and published at the next commit, just before the offsets are committed (the worker's
commit flushes the producer), so readers of the output see a record only once the input it came
from is about to be committed. Sends made outside record handling (timers, web views, scripts) go
out at once, as in Faust. Under exactly_once this is what transactions do already.
"""

from __future__ import annotations

import asyncio
from typing import Any, Unpack

from .events import current_event
from .transport.base import Delivery, Headers, Producer, SendOptions

__all__ = ["HeldProducer"]


class HeldProducer:
    """A producer that holds records sent during record handling until :meth:`flush`."""

    def __init__(self, inner: Producer) -> None:
        self.inner = inner
        self._held: list[tuple[str, bytes | None, bytes | None, SendOptions, asyncio.Future[Any]]] = []

    @property
    def held(self) -> int:
        """Records waiting for the next commit."""
        return len(self._held)

    def __getattr__(self, name: str) -> Any:  # start, stop, partitions_for, fence, transactions...
        return getattr(self.inner, name)

    def _hold(self, topic: str, key: bytes | None, value: bytes | None, options: SendOptions) -> Delivery:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._held.append((topic, key, value, options, future))
        return future  # type: ignore[return-value]  # an asyncio future is a Delivery

    async def send(
        self, topic: str, key: bytes | None, value: bytes | None, **options: Unpack[SendOptions]
    ) -> Delivery:
        if current_event() is None:
            return await self.inner.send(topic, key, value, **options)
        return self._hold(topic, key, value, options)

    def send_now(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        partition: int | None,
        timestamp_ms: int | None,
        headers: Headers | None,
    ) -> Delivery | None:
        if current_event() is None:
            return self.inner.send_now(topic, key, value, partition, timestamp_ms, headers)
        return self._hold(topic, key, value, {"partition": partition, "timestamp_ms": timestamp_ms, "headers": headers})

    async def flush(self) -> None:
        """Publish what is held, in send order, then wait for every record's delivery."""
        held, self._held = self._held, []
        sent: list[tuple[Delivery | None, asyncio.Future[Any]]] = []
        try:
            for topic, key, value, options, future in held:
                delivery = self.inner.send_now(
                    topic, key, value, options.get("partition"), options.get("timestamp_ms"), options.get("headers")
                )
                if delivery is None:
                    delivery = await self.inner.send(topic, key, value, **options)
                sent.append((delivery, future))
            await self.inner.flush()
        finally:
            for delivery, future in sent:
                if future.done():
                    continue
                if delivery is not None and delivery.done():
                    exc = delivery.exception()
                    if exc is None:
                        future.set_result(delivery.result())
                    else:
                        future.set_exception(exc)
                else:
                    future.cancel()
            for *_, future in held[len(sent) :]:
                future.cancel()
