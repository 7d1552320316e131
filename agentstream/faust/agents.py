"""``faust.agents``: the Agent class, its function type and the reply reader (``ReplyPromise``, in
Faust's ``faust.agents.replies``, is importable here too)."""

from agentstream.agents.agent import Agent, AgentFun
from agentstream.agents.agent import ReplyPromise as ReplyPromise
from agentstream.agents.replies import ReplyConsumer

__all__ = ["Agent", "AgentFun", "ReplyConsumer"]
