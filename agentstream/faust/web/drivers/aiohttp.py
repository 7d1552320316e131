"""``faust.web.drivers.aiohttp``: the aiohttp driver, agentstream's web server."""

from agentstream.web import Web

__all__ = ["Web"]
