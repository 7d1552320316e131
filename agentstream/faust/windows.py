"""``faust.windows``: window classes (whichever agentstream.tables.windows defines)."""

from typing import Any

from agentstream.tables import windows as _windows
from agentstream.tables.windows import HoppingWindow, TumblingWindow, Window

__all__ = ["HoppingWindow", "TumblingWindow", "Window"]


def __getattr__(name: str) -> Any:  # SlidingWindow and others, when agentstream defines them
    return getattr(_windows, name)
