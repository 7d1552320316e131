"""Consumed repartition records are deleted after a commit (Kafka Streams' purge): only the app's
repartition topics, at most every repartition_purge_interval, a failure warned about once."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

import pytest

import agentstream
from agentstream.exceptions import TransportError
from agentstream.transport.base import TP
from agentstream.worker.purge import RepartitionPurge, repartition_topics


class Deleter:
    def __init__(self, fail: bool = False) -> None:
        self.calls: list[dict[TP, int]] = []
        self.fail = fail

    async def delete_records(self, before: Mapping[TP, int]) -> None:
        self.calls.append(dict(before))
        if self.fail:
            raise TransportError("cannot delete records: KafkaConnectionError")


async def settle(purge: RepartitionPurge) -> None:
    for _ in range(3):
        await asyncio.sleep(0)
    await purge.stop()


async def test_only_repartition_partitions_are_purged_to_their_committed_offset() -> None:
    deleter = Deleter()
    purge = RepartitionPurge(deleter, {"app-by-repartition"}, interval=0.001)
    purge.after_commit({TP("app-by-repartition", 0): 5, TP("orders", 0): 9})
    await settle(purge)
    assert deleter.calls == [{TP("app-by-repartition", 0): 5}]
    await asyncio.sleep(0.002)
    purge.after_commit({TP("app-by-repartition", 0): 5, TP("app-by-repartition", 1): 2})  # 0 is purged already
    await settle(purge)
    assert deleter.calls[-1] == {TP("app-by-repartition", 1): 2}


async def test_purges_wait_for_the_interval_and_zero_disables_them() -> None:
    deleter = Deleter()
    purge = RepartitionPurge(deleter, {"rp"}, interval=3600)
    purge.after_commit({TP("rp", 0): 1})
    await settle(purge)
    purge.after_commit({TP("rp", 0): 2})  # within the interval
    await settle(purge)
    assert deleter.calls == [{TP("rp", 0): 1}]
    off = RepartitionPurge(deleter, {"rp"}, interval=0)
    off.after_commit({TP("rp", 0): 3})
    await settle(off)
    assert len(deleter.calls) == 1 and not off.enabled
    assert not RepartitionPurge(object(), {"rp"}, interval=1).enabled  # a transport that cannot delete


async def test_a_broker_that_cannot_purge_is_warned_about_once(caplog: pytest.LogCaptureFixture) -> None:
    deleter = Deleter(fail=True)
    purge = RepartitionPurge(deleter, {"rp"}, interval=0.001)
    with caplog.at_level(logging.WARNING, logger="agentstream.worker"):
        for offset in (1, 2):
            purge.after_commit({TP("rp", 0): offset})
            await settle(purge)
            await asyncio.sleep(0.002)
    assert len(deleter.calls) == 2  # tried again: the failure may pass
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "could not purge consumed records of repartition topics rp" in warnings[0]


async def test_the_repartition_topics_are_the_internal_group_by_topics() -> None:
    app = agentstream.App("purge", broker="memory://purge", web_enabled=False)
    out = app.topic("out")

    @app.agent(app.topic("orders", value_type=dict))
    async def agent(stream: agentstream.Stream) -> None:
        async for _ in stream.group_by(lambda v: v["c"], name="by_c").through(out):
            pass

    await app.discover()
    assert repartition_topics(app.agents.values()) == {"purge-by_c-repartition"}
