"""``faust.worker``: ``Worker(app).execute_from_commandline()``."""

from agentstream.faust_compat import Worker

__all__ = ["Worker"]
