"""``faust.agents``: the Agent class."""

from agentstream.agents.agent import Agent

__all__ = ["Agent"]
