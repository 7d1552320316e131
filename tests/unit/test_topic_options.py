"""A misspelt topic option is a TypeError naming it, never silently dropped."""

from __future__ import annotations

import pytest

import agentstream
from agentstream.topics import Topic


def test_a_misspelt_topic_option_is_a_type_error_naming_it() -> None:
    app = agentstream.App("opts", broker="memory://")
    with pytest.raises(TypeError, match="valu_type"):
        Topic(app, "x", valu_type=int)  # type: ignore[call-arg]
    assert Topic(app, "x", value_type=int, partitions=3).partitions == 3
