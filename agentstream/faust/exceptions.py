"""``faust.exceptions``: agentstream's exception tree under Faust's module name."""

from agentstream.exceptions import *  # noqa: F401,F403
from agentstream.exceptions import ImproperlyConfigured, ValidationError

__all__ = ["ImproperlyConfigured", "ValidationError"]
