"""``faust.contrib.fastapi``: Faust's older name for :mod:`agentstream.faust.contrib.asgi` (nothing
here needs FastAPI itself: ``FastAPI(lifespan=faust_lifespan(app))``)."""

from .asgi import (
    AsgiService,
    FaustLifespanMiddleware,
    LoopMismatch,
    bind_to_running_loop,
    faust_app_running,
    faust_lifespan,
    instrument_asgi_app,
    serve_asgi,
)

__all__ = [
    "LoopMismatch",
    "AsgiService",
    "FaustLifespanMiddleware",
    "bind_to_running_loop",
    "faust_app_running",
    "faust_lifespan",
    "instrument_asgi_app",
    "serve_asgi",
]
