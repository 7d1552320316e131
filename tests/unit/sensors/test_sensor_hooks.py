"""Faust's sensor hooks, each called where Faust calls it, on a worker run with a commit and a
failed send (the memory broker's fault injection); ``app.monitor``'s counters follow them."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from typing import Any

import aiohttp

import agentstream
from agentstream.exceptions import ProducerError
from agentstream.sensors import Monitor, Sensor
from agentstream.testing import AppHarness

# Every hook of faust.Sensor but on_threaded_producer_buffer_processed (Faust's producer_threaded
# setting only; agentstream has no threaded producer, so it is never called).
EVERY_HOOK = {
    "on_message_in",
    "on_stream_event_in",
    "on_stream_event_out",
    "on_message_out",
    "on_topic_buffer_full",
    "on_table_get",
    "on_table_set",
    "on_table_del",
    "on_commit_initiated",
    "on_commit_completed",
    "on_send_initiated",
    "on_send_completed",
    "on_send_error",
    "on_assignment_start",
    "on_assignment_completed",
    "on_rebalance_start",
    "on_rebalance_return",
    "on_rebalance_end",
    "on_web_request_start",
    "on_web_request_end",
}


class Recorder(Sensor):
    """Counts each hook, and checks each end hook gets its start hook's state back."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.mismatched: list[str] = []
        self.offsets_in: list[tuple[str, int, int]] = []

    def _start(self, hook: str) -> Any:
        self.calls[hook] += 1
        return (hook, self.calls[hook])

    def _end(self, hook: str, state: Any, start: str) -> None:
        self.calls[hook] += 1
        if not (isinstance(state, tuple) and state[0] == start):
            self.mismatched.append(f"{hook} got {state!r}")

    def on_message_in(self, tp: Any, offset: int, message: Any) -> None:
        self.calls["on_message_in"] += 1
        self.offsets_in.append((tp.topic, tp.partition, offset))

    def on_stream_event_in(self, tp: Any, offset: int, stream: Any, event: Any) -> Any:
        assert stream is not None and event.message.offset == offset
        return self._start("on_stream_event_in")

    def on_stream_event_out(self, tp: Any, offset: int, stream: Any, event: Any, state: Any = None) -> None:
        self._end("on_stream_event_out", state, "on_stream_event_in")

    def on_message_out(self, tp: Any, offset: int, message: Any) -> None:
        self.calls["on_message_out"] += 1

    def on_topic_buffer_full(self, tp: Any) -> None:
        self.calls["on_topic_buffer_full"] += 1

    def on_table_get(self, table: Any, key: Any) -> None:
        self.calls["on_table_get"] += 1

    def on_table_set(self, table: Any, key: Any, value: Any) -> None:
        self.calls["on_table_set"] += 1

    def on_table_del(self, table: Any, key: Any) -> None:
        self.calls["on_table_del"] += 1

    def on_commit_initiated(self, consumer: Any) -> Any:
        return self._start("on_commit_initiated")

    def on_commit_completed(self, consumer: Any, state: Any) -> None:
        self._end("on_commit_completed", state, "on_commit_initiated")

    def on_send_initiated(self, producer: Any, topic: str, message: Any, keysize: int, valsize: int) -> Any:
        return self._start("on_send_initiated")

    def on_send_completed(self, producer: Any, state: Any, metadata: Any) -> None:
        self._end("on_send_completed", state, "on_send_initiated")

    def on_send_error(self, producer: Any, exc: BaseException, state: Any) -> None:
        assert isinstance(exc, ProducerError)
        self._end("on_send_error", state, "on_send_initiated")

    def on_assignment_start(self, assignor: Any) -> Any:
        return self._start("on_assignment_start")

    def on_assignment_error(self, assignor: Any, state: Any, exc: BaseException) -> None:
        self._end("on_assignment_error", state, "on_assignment_start")

    def on_assignment_completed(self, assignor: Any, state: Any) -> None:
        self._end("on_assignment_completed", state, "on_assignment_start")

    def on_rebalance_start(self, app: Any) -> Any:
        return self._start("on_rebalance_start")

    def on_rebalance_return(self, app: Any, state: Any) -> None:
        self._end("on_rebalance_return", state, "on_rebalance_start")

    def on_rebalance_end(self, app: Any, state: Any) -> None:
        self._end("on_rebalance_end", state, "on_rebalance_start")

    def on_web_request_start(self, app: Any, request: Any, *, view: Any = None) -> Any:
        return self._start("on_web_request_start")

    def on_web_request_end(self, app: Any, request: Any, response: Any, state: Any, *, view: Any = None) -> None:
        assert response is not None and response.status == 200
        self._end("on_web_request_end", state, "on_web_request_start")


async def _until(check: Any, what: str, timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def _shop() -> tuple[agentstream.App, agentstream.Topic]:
    app = agentstream.App(f"sensed-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=2)
    orders = app.topic("orders", key_type=str, value_type=int)
    receipts = app.topic("receipts", key_type=str, value_type=int)
    totals = app.Table("totals", default=int)

    @app.agent(orders)
    async def book(stream: Any) -> None:
        async for key, amount in stream.items():
            if amount < 0:
                del totals[key]
            else:
                totals[key] += amount
            await receipts.send(key=key, value=amount)

    return app, orders


async def test_a_sensor_gets_every_hook_on_a_run_with_a_commit_and_a_failed_send() -> None:
    app, _ = _shop()
    recorder = Recorder()
    app.sensors.add(recorder)
    monitor = app.monitor
    h = AppHarness(app, buffer_max_records=1)  # every fetched batch fills its buffer
    stopped_by: BaseException | None = None
    try:
        async with h:
            for i in range(6):
                await h.send("orders", i + 1, key=f"k{i % 3}")
            await h.send("orders", -1, key="k0")  # a delete
            await h.wait_idle()  # a commit
            async with aiohttp.ClientSession() as s, s.get(f"{h.web.url}/livez") as r:
                assert r.status == 200
            faults = h.transport.faults
            faults.arm("send_fail")  # the agent's next send fails (not the test's own)
            with faults.suspended():
                await h.send("orders", 5, key="k1")
            await _until(lambda: recorder.calls["on_send_error"] == 1, "the failed send's on_send_error")
            await _until(lambda: monitor.send_errors == 1, "Monitor.send_errors")
    except ProducerError as exc:  # the worker stops on the failed delivery at its next commit: expected
        stopped_by = exc
    assert stopped_by is None or "injected" in str(stopped_by)
    assert faults.fired["send_fail"] == 1
    missing = EVERY_HOOK - set(recorder.calls)
    assert not missing, f"hooks never called: {sorted(missing)}"
    assert not recorder.mismatched, recorder.mismatched
    calls = recorder.calls
    # per record, as Faust: 8 records in (the test's own sends are not the worker's), each acked
    assert calls["on_message_in"] == calls["on_stream_event_in"] == 8
    assert calls["on_stream_event_out"] >= 7 and calls["on_message_out"] == calls["on_stream_event_out"]
    assert len(set(recorder.offsets_in)) == 8
    assert calls["on_table_set"] == 7 and calls["on_table_del"] == 1 and calls["on_table_get"] >= 7
    # the test's 8 sends (app.topic.send) and the agent's 8 receipts
    assert calls["on_send_initiated"] == 16
    assert calls["on_send_completed"] + calls["on_send_error"] == 16 and calls["on_send_error"] == 1
    # a commit that fails (the failed delivery) is initiated and never completed, as in Faust
    assert calls["on_commit_initiated"] > calls["on_commit_completed"] >= 1
    # Monitor's counters are true
    assert monitor.send_errors == 1
    assert monitor.messages_received_total == 8 and monitor.messages_received_by_topic["orders"] == 8
    assert monitor.events_total == 8
    assert monitor.messages_sent == 16 and monitor.messages_sent_by_topic["receipts"] == 8
    assert monitor.tables["totals"].keys_updated == 7 and monitor.tables["totals"].keys_deleted == 1
    assert monitor.commit_count >= 1 and len(monitor.commit_latency) >= 1
    assert monitor.http_response_codes[200] >= 1
    assert monitor.assignments_completed >= 1 and monitor.rebalances >= 1
    assert sum(monitor.topic_buffer_full.values()) >= 0  # cleared at each rebalance end (Faust's)
    assert monitor.asdict()["send_errors"] == 1
    assert sum(monitor.tp_end_offsets.values()) >= 7  # the source partitions' end offsets, at the commits


async def test_sensors_added_while_running_see_the_next_records_and_removed_ones_nothing() -> None:
    app, _ = _shop()
    async with AppHarness(app) as h:
        await h.send("orders", 1, key="a")
        await h.wait_idle()
        monitor = Monitor()
        app.sensors.add(monitor)
        for i in range(3):
            await h.send("orders", 1, key=f"b{i}")
        await h.wait_idle()
        await _until(lambda: monitor.messages_received_total == 3, "three records counted")
        app.sensors.remove(monitor)
        await h.send("orders", 1, key="c")
        await h.wait_idle()
    assert monitor.messages_received_total == 3 and monitor.events_total == 3
    assert monitor.tables["totals"].keys_updated == 3
    assert monitor.messages_active == 0 and monitor.events_active == 0


async def test_a_sensor_that_raises_is_logged_and_the_records_still_go_through(caplog: Any) -> None:
    class Broken(Sensor):
        def on_message_in(self, tp: Any, offset: int, message: Any) -> None:
            raise RuntimeError("sensor bug")

    app, _ = _shop()
    app.sensors.add(Broken())
    async with AppHarness(app) as h:
        await h.send("orders", 2, key="a")
        await h.wait_idle()
        assert h.table("totals") == {"a": 2}
    assert "sensor bug" in caplog.text


async def test_under_exactly_once_the_transactional_sends_are_reported_too() -> None:
    app, _ = _shop()
    monitor = app.monitor
    async with AppHarness(app, processing_guarantee="exactly_once") as h:
        for i in range(3):
            await h.send("orders", i + 1, key=f"k{i}")
        await h.wait_idle()
        await _until(lambda: len(monitor.send_latency) == 6, "six sends completed")
    assert monitor.messages_sent_by_topic["receipts"] == 3 and monitor.send_errors == 0
    assert monitor.messages_received_total == 3 and monitor.tables["totals"].keys_updated == 3
