"""``faust.web.blueprints``: ``Blueprint`` (``from faust.web.blueprints import Blueprint``)."""

from agentstream.web.blueprints import Blueprint

__all__ = ["Blueprint"]
