"""The synchronous append a producer offers: the one typed interface compiled callers (a topic's
send) call natively.

Both transports' producers extend :class:`Appender` (the kafka:// one natively, the memory:// one
as a Python subclass), so ``topic.send`` reaches ``send_now`` by a C call instead of a Python
method call per record. Compiled with mypyc (setup.py ``COMPILED``).
"""

from __future__ import annotations

from typing import Any

from mypy_extensions import mypyc_attr

__all__ = ["Appender"]


@mypyc_attr(allow_interpreted_subclasses=True)
class Appender:
    """A producer's synchronous append (:meth:`agentstream.transport.base.Producer.send_now`)."""

    def send_now(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        partition: int | None,
        timestamp_ms: int | None,
        headers: Any,
    ) -> Any:
        """The record's delivery when it was appended at once; None: call ``send``."""
        return None
