"""Faust's ``app.agents``: the app's agents as a mapping by name, in declaration order."""

from __future__ import annotations

from typing import Any

__all__ = ["AgentManager"]


class AgentManager(dict[str, Any]):
    """``app.agents``: ``app.agents['count_words']``, ``'count_words' in app.agents``, iteration
    over the names and ``.values()`` over the agents, as Faust's AgentManager."""

    def __repr__(self) -> str:
        return f"<AgentManager: {list(self)}>"
