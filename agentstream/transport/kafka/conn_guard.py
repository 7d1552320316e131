"""A request on a broker connection whose socket already closed fails as a connection error.

aiokafka takes a connection as usable while its reader has seen neither end of stream nor an error
(``AIOKafkaConnection.connected``). When a broker dies its sockets close at once, but the reader
learns of it only from ``connection_lost``, which the event loop delivers a callback later; a
request sent in between is written to a closed transport. uvloop (the worker's loop) raises
``RuntimeError: ... the handler is closed`` there, which aiokafka does not expect: it catches only
``OSError`` around the write. Where aiokafka's background metadata task (``_md_synchronizer``) made
that request, the task ended on the RuntimeError, silently, and with it every metadata refresh of
the client: its group coordinator waited for a refresh that never came, so a worker whose group
coordinator died neither rejoined nor logged anything again (issue 39, the broker-death test). The
plain asyncio loop drops such a write instead, and the request waits out its timeout.

:func:`install` makes ``AIOKafkaConnection.send`` look at the transport first: a closing one closes
the connection as broken (its requests in flight fail, the client refreshes metadata) and the send
raises ``KafkaConnectionError``, which aiokafka retries everywhere. Checked against aiokafka 0.14;
if the connection class lacks the shape this relies on, aiokafka is left alone.
"""

from __future__ import annotations

import functools
from typing import Any

from aiokafka import conn as aiokafka_conn  # type: ignore[import-untyped,unused-ignore]
from aiokafka.errors import KafkaConnectionError  # type: ignore[import-untyped,unused-ignore]

__all__ = ["install", "installed"]

_MARK = "_agentstream_conn_guard"


def _closing(conn: Any) -> bool:
    writer = getattr(conn, "_writer", None)
    transport = getattr(writer, "transport", None)
    return transport is not None and bool(transport.is_closing())


def installed() -> bool:
    return bool(getattr(aiokafka_conn.AIOKafkaConnection.send, _MARK, False))


def install() -> bool:
    """Guard every aiokafka connection's ``send`` (idempotent). False if aiokafka's connection
    has another shape (then it is left alone)."""
    cls = aiokafka_conn.AIOKafkaConnection
    original = getattr(cls, "send", None)
    reason = getattr(aiokafka_conn, "CloseReason", None)
    if original is None or reason is None or not hasattr(reason, "CONNECTION_BROKEN"):
        return False
    if getattr(original, _MARK, False):
        return True

    @functools.wraps(original)
    def send(self: Any, request: Any, expect_response: bool = True) -> Any:
        if _closing(self):
            self.close(reason=reason.CONNECTION_BROKEN)
            raise KafkaConnectionError(f"Connection at {self.host}:{self.port} closed")
        return original(self, request, expect_response)

    setattr(send, _MARK, True)
    cls.send = send
    return True
