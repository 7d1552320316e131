"""``faust.assignor``: the classes Faust's ``PartitionAssignor`` and ``LeaderAssignor`` settings
subclass (agentstream's group assignor, and what answers ``app.is_leader()``)."""

from agentstream.leader import LeaderAssignor
from agentstream.worker.assignor import PartitionNumberAssignor as PartitionAssignor

__all__ = ["LeaderAssignor", "PartitionAssignor"]
