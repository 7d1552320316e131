"""The worker's web server: interactive table queries, metadata, live status, Prometheus metrics
and app pages (``@app.page("/path")`` with a function or a :class:`View` subclass).

It runs beside a worker: :func:`run_worker` (or :func:`serve` before ``worker.start()``) attaches it."""

from __future__ import annotations

from .blueprints import Blueprint
from .cors import ResourceOptions
from .responses import error_response, json_response
from .runner import run_worker, serve
from .server import Web
from .views import View, gives_model, takes_model

__all__ = [
    "Web",
    "View",
    "Blueprint",
    "ResourceOptions",
    "takes_model",
    "gives_model",
    "json_response",
    "error_response",
    "serve",
    "run_worker",
]
