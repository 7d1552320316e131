"""``faust.channels``: in-memory channels."""

from agentstream.channels import Channel

__all__ = ["Channel"]
