"""``faust.events``: the Event class. Faust's ``event.message.tp`` is
:class:`agentstream.transport.message.Message`'s own property."""

from __future__ import annotations

from agentstream.events import Event, current_event

__all__ = ["Event", "current_event"]
