"""``faust.streams``: Stream and the current event."""

from agentstream.events import current_event
from agentstream.streams import Stream

__all__ = ["Stream", "current_event"]
