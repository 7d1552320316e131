"""What views and the table endpoints use of the web server, as a Protocol: they are imported by
:mod:`agentstream.web.server`, so they do not import it back (no import cycle inside ``web/``)."""

from __future__ import annotations

from typing import Protocol

from ..types import AppT
from ..worker.assignor import Assignment
from .forward import Forwarder

__all__ = ["WebT"]


class WebT(Protocol):
    """:class:`agentstream.web.server.Web` as its views and table endpoints see it."""

    redirect: bool
    forward_timeout: float
    token: bytes | None
    scheme: str
    forwarder: Forwarder

    @property
    def app(self) -> AppT: ...

    @property
    def address(self) -> str: ...

    @property
    def url(self) -> str: ...

    def assignment(self) -> Assignment: ...

    def url_for(self, name: str, **params: object) -> str: ...
