"""The event an agent is handling: the decoded key and value plus where the record came from.

``current_event()`` is a context variable because each agent instance runs in its own asyncio
task: sends made while handling a record can read its timestamp and reply address without the
agent passing them around.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextvars import ContextVar
from typing import Any, Final

from .transport.base import TP, Message

__all__ = ["Event", "current_event"]


class Event:
    """One record handed to an agent (Faust's ``Event``); ``message`` is the raw consumer record."""

    __slots__ = ("key", "value", "message", "tp")

    def __init__(self, key: Any, value: Any, message: Message, tp: TP | None = None) -> None:
        self.key = key
        self.value = value
        self.message = message
        self.tp = TP(message.topic, message.partition) if tp is None else tp

    @property
    def topic(self) -> str:
        return self.message.topic

    @property
    def partition(self) -> int:
        return self.message.partition

    @property
    def offset(self) -> int:
        return self.message.offset

    @property
    def timestamp(self) -> float:
        """Event time in seconds, like Faust."""
        return self.message.timestamp / 1000.0

    @property
    def headers(self) -> Sequence[tuple[str, bytes]]:
        return self.message.headers

    def header(self, name: str) -> bytes | None:
        for k, v in self.message.headers or ():
            if k == name:
                return v
        return None

    def where(self) -> str:
        """``topic[partition]@offset``, the form every log line about a record uses."""
        m = self.message
        return f"{m.topic}[{m.partition}]@{m.offset}"

    def __repr__(self) -> str:
        return f"<Event {self.where()} key={self.key!r} value={self.value!r}>"


_current: Final[ContextVar[Event | None]] = ContextVar("agentstream_current_event", default=None)


current_event: Final = _current.get
"""``current_event()``: the event the calling agent instance is handling, or None outside an
agent. The ContextVar's own ``get`` (a C call, no Python frame): every send and table access
reads it once per record."""


set_current_event: Final = _current.set
"""Make ``event`` the calling agent instance's current event: the ContextVar's own ``set``, a C
call with no Python frame, since streams call it once per record."""
