"""What Faust's client monitors name streams by: the stream's label, lower case, ``_`` for
anything that is not a name character."""

from __future__ import annotations

import re
from typing import Any

from agentstream.sensors import stream_label

_NOT_NAME = re.compile(r"[<>:\s]+")


def stream_metric_label(stream: Any) -> str:
    label = stream_label(stream)
    if label.startswith("Stream:"):
        label = label[len("Stream:") :]
    return _NOT_NAME.sub("_", label).strip("_").lower()


def table_name(table: Any) -> str:
    return str(getattr(table, "name", table))
