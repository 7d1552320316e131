"""``faust.web.views``: the View class and the model decorators
(``from faust.web.views import View, takes_model, gives_model``)."""

from agentstream.web import View
from agentstream.web.views import gives_model, takes_model

__all__ = ["View", "takes_model", "gives_model"]
