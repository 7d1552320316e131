"""``faust.contrib.fastapi``: Faust's older name for :mod:`agentstream.faust.contrib.asgi` (nothing
here needs FastAPI itself: ``FastAPI(lifespan=faust_lifespan(app))``)."""

from .asgi import (
    FaustLifespanMiddleware,
    LoopMismatch,
    bind_to_running_loop,
    faust_app_running,
    faust_lifespan,
    instrument_asgi_app,
)

__all__ = [
    "LoopMismatch",
    "FaustLifespanMiddleware",
    "bind_to_running_loop",
    "faust_app_running",
    "faust_lifespan",
    "instrument_asgi_app",
]
