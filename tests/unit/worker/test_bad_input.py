"""Issue 15 item 1 (reply side): a ``Faust-Ag-ReplyTo`` header is input, not configuration.
A record naming the app's own changelog or another app's topic gets no reply written there."""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest

import agentstream
from agentstream.agents.replies import CORRELATION_ID, REPLY_TO, reply_topic_allowed
from agentstream.testing import AppHarness

pytestmark = pytest.mark.asyncio


def _app(**settings: object) -> tuple[agentstream.App, agentstream.Agent, agentstream.Table]:
    app = agentstream.App(f"replies-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1, **settings)
    requests = app.topic("requests", value_type=int)
    counts = app.Table("counts", default=int)

    @app.agent(requests)
    async def square(stream: agentstream.Stream):  # type: ignore[no-untyped-def]
        async for value in stream:
            counts["n"] += 1
            yield value * value

    return app, square, counts


async def test_reply_to_a_changelog_or_foreign_topic_is_refused(caplog: pytest.LogCaptureFixture) -> None:
    app, square, counts = _app()
    changelog = counts.changelog_topic.name
    victim = app.topic("other-app-replies-0123456789ab", value_type=int)
    async with AppHarness(app) as h:
        with caplog.at_level(logging.WARNING, logger="agentstream.agents.replies"):
            for target in (changelog, victim.name, "", "../etc", "x" * 300):
                await square.send(value=3, headers=[(REPLY_TO, target.encode()), (CORRELATION_ID, b"c1")])
            await square.send(value=4, headers=[(REPLY_TO, b"\xff\xfe"), (CORRELATION_ID, b"c2")])
            await h.wait_idle()
        changelog_keys = [k for k, _ in h.read(changelog)]
        assert all(k is not None for k in changelog_keys), changelog_keys  # no null-key reply in the changelog
        assert h.read(victim.name) == []
        assert f"names {changelog!r}" in caplog.text and "reply_topics" in caplog.text
        assert h.table("counts")["n"] == 6  # every record was processed
        assert await square.ask(value=5) == 25  # the app's own reply topics still work


async def test_reply_topics_setting_allows_more() -> None:
    app, square, _ = _app(reply_topics="audit-*, exact-topic")
    assert reply_topic_allowed(app, "audit-1") and reply_topic_allowed(app, "exact-topic")
    assert not reply_topic_allowed(app, "auditx") and not reply_topic_allowed(app, f"{app.id}-counts-changelog")
    assert reply_topic_allowed(app, f"{app.id}-replies-0123456789ab")
    assert not reply_topic_allowed(app, "otherapp-replies-0123456789ab")
    audit = app.topic("audit-log", value_type=int)
    async with AppHarness(app) as h:
        await square.send(value=6, headers=[(REPLY_TO, b"audit-log"), (CORRELATION_ID, b"c")])
        await h.wait_idle()
        assert [v for _, v in h.read(audit.name)] == [36]


# -- item 6: one far-future timestamp does not wipe a windowed partition --------------------------------


def _windowed_app(**settings: object) -> tuple[agentstream.App, Any]:
    app = agentstream.App(f"future-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1, **settings)
    topic = app.topic("events", key_type=str, value_type=dict)
    wt = app.Table("counts", default=int, key_type=str).tumbling(60.0, expires=3600.0)

    @app.agent(topic)
    async def count(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            wt[event.key] += 1

    return app, wt


async def test_a_record_ten_years_ahead_does_not_expire_every_window() -> None:
    import time

    app, wt = _windowed_app(on_agent_error="dead-letter")
    now = time.time()
    async with AppHarness(app) as h:
        for dt in (-30.0, -20.0):
            await h.send("events", {}, key="k", timestamp=now + dt)
        await h.send("events", {"bad": True}, key="k", timestamp=now + 10 * 365 * 86400)
        for dt in (-10.0, -5.0):
            await h.send("events", {}, key="k", timestamp=now + dt)
        await h.wait_idle()
        values = {window: v for (key, window), v in wt.items()}
        assert sum(values.values()) == 4, values  # nothing expired, nothing late
        assert wt.late_dropped == 0
        dead = h.read(app.settings.dead_letter_topic)
        assert [v for _, v in dead] == [{"bad": True}] or len(dead) == 1, dead
        assert h.worker.errors.agent_errors + h.worker.errors.decode_errors == 1


async def test_the_bound_can_be_switched_off() -> None:
    import time

    app, wt = _windowed_app(max_message_time_difference=0)
    async with AppHarness(app) as h:
        await h.send("events", {}, key="k", timestamp=time.time() + 10 * 365 * 86400)
        await h.wait_idle()
        assert h.worker.errors.agent_errors == 0 and len(list(wt.items())) == 1


# -- issue 45 finding 3: a bad correlation header does not kill the process's reply reader ----------------


async def test_a_reply_with_a_bad_correlation_header_is_skipped_and_later_asks_work(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app, square, _ = _app()
    async with AppHarness(app) as h:
        replies = await app.replies()
        reply_to = replies.topic_name.encode()
        bad: list[bytes | None] = [b"\xff\xfe", None, b"", b"x" * 10_000]
        with caplog.at_level(logging.WARNING, logger="agentstream.agents.replies"):
            for cid in bad:  # anyone who can produce to the agent's input can send these
                await square.send(value=2, headers=[(REPLY_TO, reply_to), (CORRELATION_ID, cid)])
            await h.wait_idle()
            assert await square.ask(value=7) == 49  # the reader read past them and still answers
        assert replies.bad_replies == len(bad)
        assert "skipped reply" in caplog.text and CORRELATION_ID in caplog.text
