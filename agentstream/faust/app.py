"""``faust.app``: the App class."""

from agentstream.app import App

__all__ = ["App"]
