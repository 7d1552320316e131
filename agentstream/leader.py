"""Faust's leader assignor (``LeaderAssignor`` setting): what ``app.is_leader()`` asks.

Faust's finds its leader through a one-partition leader topic; agentstream makes no such topic (the
consumer group's leader, which plans the assignment, is the leader), so this one reads the running
worker's last assignment. An app's ``LeaderAssignor`` setting (a subclass, or its ``'module:Class'``
path) replaces it: its ``is_leader()`` then decides ``app.is_leader()``, the timers and tasks declared
``on_leader=True`` and ``@app.crontab(on_leader=True)``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["LeaderAssignor"]


class LeaderAssignor:
    """``is_leader()``: True in the worker the last rebalance made the group leader (False outside a
    running worker). Made as Faust makes its own, ``LeaderAssignor(app, loop=..., beacon=...)``."""

    def __init__(self, app: Any, **kwargs: Any) -> None:
        self.app = app

    def is_leader(self) -> bool:
        worker = self.app.worker
        return worker is not None and bool(worker.assignor.is_leader)
