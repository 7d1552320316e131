"""``faust.exceptions``: agentstream's exception tree under Faust's module name (Faust's
``ImproperlyConfigured`` and ``ValidationError`` are in it)."""

from agentstream import exceptions as _tree
from agentstream.exceptions import *  # noqa: F403  (the re-export is the point of this module)

__all__ = sorted(
    name
    for name, value in vars(_tree).items()
    if isinstance(value, type) and issubclass(value, Exception) and value.__module__ == _tree.__name__
)
