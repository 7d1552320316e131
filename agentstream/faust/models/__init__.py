"""``faust.models``: Record (Faust's Model) and the field helpers in ``faust.models.fields``."""

from agentstream.models import FieldError, Record

Model = Record

__all__ = ["Model", "Record", "FieldError"]
