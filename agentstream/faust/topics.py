"""``faust.topics``: the Topic class."""

from agentstream.topics import Topic, TopicGroup

__all__ = ["Topic", "TopicGroup"]
