"""Records decode as Faust decodes them (issue 40 item 1): messy values are kept, not dropped by the
``skip`` policy; a record Faust also refuses (``validation=True``) stays a decode error that names
topic[partition]@offset. The same cases run side by side under faust-streaming in
tests/faust_compat/scenarios/models.py (``records_decode_as_faust``)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

import agentstream
from agentstream.testing import AppHarness


class Reading(agentstream.Record):
    sensor: str
    value: int
    unit: str | None
    scale: int = 1


class Checked(agentstream.Record, validation=True):
    sensor: str
    value: int


async def test_messy_records_reach_the_agent_and_one_faust_refuses_is_a_decode_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = agentstream.App("messy", broker="memory://", topic_partitions=1)
    readings = app.topic("readings", value_type=Reading)
    checked = app.topic("checked", value_type=Checked)
    got: list[Any] = []

    @app.agent(readings)
    async def read(stream: agentstream.Stream) -> None:
        async for r in stream:
            got.append((r.sensor, r.value, r.unit, r.scale))

    @app.agent(checked)
    async def check(stream: agentstream.Stream) -> None:
        async for c in stream:
            got.append((c.sensor, c.value))

    caplog.set_level(logging.ERROR)
    async with AppHarness(app) as h:
        await readings.send_raw(None, b'{"sensor": null, "value": "42", "scale": null}')
        await readings.send_raw(None, b'{"sensor": "s2", "value": 1.5}')
        await checked.send_raw(None, b'{"sensor": "s3", "value": "abc"}')  # Faust: int('abc') fails
        await checked.send_raw(None, b'{"sensor": "s4", "value": "7"}')  # Faust: coerced to 7
        await h.wait_idle()
    assert sorted(got, key=str) == sorted([(None, "42", None, 1), ("s2", 1.5, None, 1), ("s4", 7)], key=str)
    assert "cannot decode record checked[0]@0" in caplog.text
    assert "Checked.value: cannot coerce 'abc' to int" in caplog.text
