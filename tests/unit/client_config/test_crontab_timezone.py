"""Faust's ``timezone`` setting: the timezone of every ``@app.crontab`` that names none (a crontab's
own ``timezone=`` still wins). Virtual time: a day passes without waiting."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

import agentstream
from agentstream.clock import clock_for
from agentstream.testing import AppHarness

pytestmark = pytest.mark.asyncio


async def test_crontabs_use_the_apps_timezone_unless_they_name_one() -> None:
    app = agentstream.App("tz-cron", topic_partitions=1, timezone="Asia/Tokyo")
    runs: dict[str, list[str]] = {"app": [], "own": []}

    def now() -> str:
        return datetime.fromtimestamp(clock_for(app).time(), UTC).strftime("%H:%M")

    @app.crontab("0 9 * * *")  # 09:00 in Tokyo is 00:00 UTC
    async def tokyo_morning() -> None:
        runs["app"].append(now())

    @app.crontab("0 9 * * *", timezone="UTC")
    async def utc_morning() -> None:
        runs["own"].append(now())

    async with AppHarness(app, virtual_time=True) as h:  # virtual time starts 2024-01-01T00:00Z
        await h.advance(86400 + 60)
    assert runs == {"app": ["00:00"], "own": ["09:00"]}
