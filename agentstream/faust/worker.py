"""``faust.worker``: ``Worker(app).execute_from_commandline()``."""

from agentstream.faust_worker import Worker

__all__ = ["Worker"]
