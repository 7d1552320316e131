"""``faust.web``: views, responses, blueprints and the model decorators
(``from faust.web import View, Request, Response, Blueprint, ResourceOptions, takes_model, gives_model``)."""

from aiohttp.web import Request, Response

from agentstream.web import ResourceOptions, View, Web, error_response, json_response
from agentstream.web.blueprints import Blueprint
from agentstream.web.views import gives_model, takes_model

from . import exceptions

__all__ = [
    "View",
    "Web",
    "Request",
    "Response",
    "Blueprint",
    "ResourceOptions",
    "takes_model",
    "gives_model",
    "json_response",
    "error_response",
    "exceptions",
]
