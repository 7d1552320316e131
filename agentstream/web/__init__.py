"""The worker's web server: interactive table queries, metadata, live status, Prometheus metrics
and app pages (``@app.page("/path")`` with a function or a :class:`View` subclass)."""

from __future__ import annotations

from .responses import error_response, json_response
from .server import Web
from .views import View

from ..worker import worker as _worker

__all__ = ["Web", "View", "json_response", "error_response"]

# A worker whose settings enable the web server starts this one (the worker does not import web/).
_worker.upper.web_server = Web
