"""A web server service the app registered (``app.web_server(...)``, Faust 0.15's pluggable web
framework, e.g. an ASGI app under uvicorn: ``faust.contrib.asgi.serve_asgi``) run as the worker's
web server, in place of agentstream's aiohttp one."""

from __future__ import annotations

import inspect
from typing import Any
from urllib.parse import urlsplit

__all__ = ["ServiceServer"]


class ServiceServer:
    """The worker's :class:`~agentstream.worker.worker.Server` for a registered service: started
    with the worker (after the producer, before the group is joined) and stopped with it. Its
    address is the service's ``get_web_url()`` (or ``web_url``), else ``fallback``."""

    def __init__(self, service: Any, fallback: str) -> None:
        self.service: Any = service() if inspect.isclass(service) else service
        self._fallback = fallback

    @property
    def address(self) -> str:
        get_url = getattr(self.service, "get_web_url", None)
        url = get_url() if callable(get_url) else getattr(self.service, "web_url", None)
        if url is None:
            return self._fallback
        parts = urlsplit(str(url))
        if not parts.hostname or parts.port is None:
            return self._fallback
        host = parts.hostname
        return f"[{host}]:{parts.port}" if ":" in host else f"{host}:{parts.port}"

    async def start(self) -> None:
        await self.service.start()

    async def stop(self) -> None:
        await self.service.stop()
