"""``faust.events``: the Event class."""

from agentstream.events import Event, current_event

__all__ = ["Event", "current_event"]
