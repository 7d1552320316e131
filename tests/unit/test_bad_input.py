"""Issue 15 item 1 (reply side): an ``agentstream-reply-to`` header is input, not configuration.
A record naming the app's own changelog or another app's topic gets no reply written there."""

from __future__ import annotations

import logging
import uuid

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
