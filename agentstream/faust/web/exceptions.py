"""``faust.web.exceptions``: the HTTP errors a view raises (``raise self.NotFound()``)."""

from agentstream.web.exceptions import *  # noqa: F403  (the re-export is the point of this module)
from agentstream.web.exceptions import __all__ as __all__
