"""``faust.windows``: window classes (whichever agentstream.tables.windows defines)."""

from typing import Any

from agentstream.tables import windows as _windows
from agentstream.tables.windows import HoppingWindow, SlidingWindow, TumblingWindow, Window

__all__ = ["Window", "HoppingWindow", "TumblingWindow", "SlidingWindow"]


def __getattr__(name: str) -> Any:  # SlidingWindow and others, when agentstream defines them
    return getattr(_windows, name)
