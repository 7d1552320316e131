"""Faust's Event and Message, as faust-streaming 0.11 behaves (checked in its venv with
``agent.test_context()``): ``message.timestamp`` is seconds as a float, ``event.headers`` a dict
(the last value of a repeated name), ``async with event`` acknowledges it on exit, and
``send``/``forward`` re-send the event (re-encoded) or its record (as read)."""

from __future__ import annotations

import pytest

import agentstream
from agentstream.events import Event
from agentstream.testing import AppHarness
from agentstream.transport.message import Message


def test_message_timestamp_is_seconds_and_the_milliseconds_stay_as_timestamp_ms() -> None:
    message = Message("t", 0, 5, 1_700_000_000_500, 0, b"k", b"v", None, 1, 1, [])
    assert message.timestamp == 1_700_000_000.5 and isinstance(message.timestamp, float)
    assert message.timestamp_ms == 1_700_000_000_500
    assert Message("t", 0, 5, -1, -1, None, None, None, -1, -1, []).timestamp is None  # format 0: none


def test_event_headers_are_a_dict_of_the_record_headers_last_value_wins() -> None:
    headers = [("h", b"1"), ("h", b"2"), ("x", b"3")]
    event = Event(b"k", "v", Message("t", 0, 0, 1000, 0, b"k", b"v", None, 1, 1, headers))
    assert event.headers == {"h": b"2", "x": b"3"}
    assert list(event.message.headers) == headers  # the record's pairs, as read
    event.headers["y"] = b"4"  # the event's own dict: a change stays
    assert event.headers == {"h": b"2", "x": b"3", "y": b"4"}
    assert Event(None, 1, Message("t", 0, 0, 1000, 0, None, None, None, -1, -1, ())).headers == {}


@pytest.mark.asyncio
async def test_agent_sees_seconds_and_a_header_dict() -> None:
    app = agentstream.App("g1-events-ts", broker="memory://", topic_partitions=1)
    src = app.topic("src", value_type=int)
    seen: list[tuple[object, object, object]] = []

    @app.agent(src)
    async def agent(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            seen.append((event.message.timestamp, event.headers, event.value))

    async with AppHarness(app) as h:
        await src.send(key=b"k", value=1, timestamp=1_700_000_000.5, headers=[("h", b"1"), ("h", b"2")])
        await h.wait_idle()
    assert seen == [(1_700_000_000.5, {"h": b"2"}, 1)]


@pytest.mark.asyncio
async def test_async_with_event_acknowledges_it_on_exit() -> None:
    app = agentstream.App("g1-events-with", broker="memory://", topic_partitions=1)
    src = app.topic("src", value_type=int)
    acks: list[tuple[int, bool, bool]] = []

    @app.agent(src)
    async def agent(stream: agentstream.Stream) -> None:
        noack = stream.noack()  # only the agent's own acks let offsets commit
        async for event in noack.events():
            async with event as same:
                assert same is event
            acks.append((event.value, event.ack(), bool(noack.ack(event))))  # both: already acknowledged

    async with AppHarness(app) as h:
        for i in range(3):
            await src.send(key=b"k", value=i)
        await h.wait_idle()  # every offset committed: each record was acknowledged by `async with`
    assert acks == [(0, False, False), (1, False, False), (2, False, False)]


@pytest.mark.asyncio
async def test_event_ack_acknowledges_a_noack_record_once() -> None:
    app = agentstream.App("g1-events-ack", broker="memory://", topic_partitions=1)
    src = app.topic("src", value_type=int)
    acks: list[tuple[bool, bool]] = []

    @app.agent(src)
    async def agent(stream: agentstream.Stream) -> None:
        async for event in stream.noack().events():
            acks.append((event.ack(), event.ack()))

    async with AppHarness(app) as h:
        await src.send(key=b"k", value=1)
        await src.send(key=b"k", value=2)
        await h.wait_idle()
    assert acks == [(True, False), (True, False)]


@pytest.mark.asyncio
async def test_event_send_reencodes_and_forward_sends_the_record_as_read() -> None:
    app = agentstream.App("g1-events-send", broker="memory://", topic_partitions=1)
    src = app.topic("src", value_type=dict)
    sent = app.topic("sent", value_type=dict)
    forwarded = app.topic("forwarded")  # raw: the bytes as they were

    @app.agent(src)
    async def agent(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            event.headers["extra"] = b"x"
            await event.send("sent", value={**event.value, "seen": True})  # a name: the app's topic
            await event.forward(forwarded)

    async with AppHarness(app) as h:
        await src.send(key=b"k", value={"n": 1}, headers=[("h", b"1")])
        await h.wait_idle()
        transport = app.transport
        sent_records = transport.read_topic("sent")  # type: ignore[attr-defined]
        fwd_records = transport.read_topic("forwarded")  # type: ignore[attr-defined]
        assert h.read("sent") == [(b"k", {"n": 1, "seen": True})]
    assert [dict(m.headers) for m in sent_records] == [{"h": b"1", "extra": b"x"}]
    assert [(m.key, m.value, list(m.headers)) for m in fwd_records] == [(b"k", b'{"n":1}', [("h", b"1")])]
    assert sent is app.topics["sent"]


@pytest.mark.asyncio
async def test_event_send_refuses_the_options_it_does_not_honour() -> None:
    from agentstream.events import Event
    from agentstream.transport.message import Message

    event = Event("k", "v", Message("t", 0, 0, 0, 0, b"k", b'"v"', None, -1, -1, ()))
    with pytest.raises(TypeError, match="value_serializer"):
        await event.send("other", value_serializer="raw")
    with pytest.raises(TypeError, match="callback"):
        await event.forward("other", callback=print)
