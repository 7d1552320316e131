"""``faust.events``: the Event class, and Faust's ``event.message.tp``."""

from __future__ import annotations

from aiokafka.structs import ConsumerRecord, TopicPartition

from agentstream.events import Event, current_event

__all__ = ["Event", "current_event"]


def _add_message_tp() -> None:
    """Faust's messages carry ``.tp``; ours are aiokafka ConsumerRecords, given the same read-only
    view (installed when this compat package is imported, which ``import agentstream`` does)."""
    if not hasattr(ConsumerRecord, "tp"):
        ConsumerRecord.tp = property(lambda m: TopicPartition(m.topic, m.partition))


_add_message_tp()
