"""``faust.web``: views and responses (``from faust.web import View, Request, Response``)."""

from aiohttp.web import Request, Response

from agentstream.web import View, Web, error_response, json_response

__all__ = ["View", "Web", "Request", "Response", "json_response", "error_response"]
