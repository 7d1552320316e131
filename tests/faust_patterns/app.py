"""Four patterns from real Faust apps (issue 44), as one module written with ``import faust``:

1. the app's own pages at ``/`` and ``/status`` (paths agentstream also serves);
2. a 2-partition source, ``group_by`` into a tumbling table of the default 8 partitions;
3. an agent declared without a topic (Faust's implicit ``<app id>-<module>.<name>`` topic);
4. ``agent.ask()`` through a second App started as a client: ``app``'s task starts ``rpc_app``
   as a client, and ``app``'s agent asks ``rpc_app``'s agents, which other workers serve
   (``-A tests.faust_patterns.app:rpc_app``): ``5 -> 50 -> 1000``.

Run under Faust (``faust -A tests.faust_patterns.app worker``) and under agentstream
(``python -m tests.faust_compat.agentstream_cli -A tests.faust_patterns.app worker``), each with
its own ``$PATTERN_PREFIX``; observations are printed as ``PATTERN-OUT <name> <json>`` lines.
``$PATTERN_PARTS`` (default ``1234``) declares only some patterns: one pattern's failure can then
be shown without another's stopping the worker first."""

from __future__ import annotations

import asyncio
import json
import os
from datetime import timedelta
from typing import Any

import faust
from faust import web

PREFIX = os.environ.get("PATTERN_PREFIX", "x")
BROKER = os.environ.get("PATTERN_BROKER", "kafka://localhost:9092")
PARTS = os.environ.get("PATTERN_PARTS", "1234")


def out(name: str, value: Any) -> None:
    print(f"PATTERN-OUT {name} {json.dumps(value, sort_keys=True)}", flush=True)


app = faust.App(f"pattern-{PREFIX}", broker=BROKER, topic_partitions=8)
rpc_app = faust.App(f"pattern-rpc-{PREFIX}", broker=BROKER, reply_create_topic=True, topic_partitions=2)


# -- 1. the app's own pages where agentstream has built-in ones ------------------------------------
if "1" in PARTS:

    @app.page("/")
    async def index(self: web.View, request: web.Request) -> web.Response:
        return self.html("<h1>pattern index</h1>")

    @app.page("/status")
    async def status(self: web.View, request: web.Request) -> web.Response:
        return self.html("<p>pattern status: ok</p>")


# -- 2. group_by from a 2-partition topic (made by the test) into an 8-partition tumbling table -------
class Ride(faust.Record):
    vendor: str
    fare: float


if "2" in PARTS:
    rides_topic = app.topic(f"pattern-{PREFIX}-rides", value_type=Ride)
    fares = app.Table("fares", default=float).tumbling(timedelta(hours=1), expires=timedelta(hours=2))

    @app.agent(rides_topic)
    async def ride(stream: Any) -> None:
        async for r in stream.group_by(Ride.vendor):
            fares[r.vendor] += r.fare
            out("fares", [r.vendor, fares[r.vendor].current()])


# -- 3. an agent without a topic: Faust's <app id>-<module>.<name> ------------------------------------
class Order(faust.Record):
    id: str
    amount: int


if "3" in PARTS:

    @app.agent(value_type=Order)
    async def order(stream: Any) -> None:
        async for o in stream:
            out("order", [o.id, o.amount])


# -- 4. ask through a second App started as a client --------------------------------------------------
@rpc_app.agent()
async def times_ten(stream: Any) -> Any:
    async for value in stream:
        yield await times_twenty.ask(value=value * 10)


@rpc_app.agent()
async def times_twenty(stream: Any) -> Any:
    async for value in stream:
        yield value * 20


rpc_client_started = asyncio.Event()


@app.task
async def start_rpc_client() -> None:
    await rpc_app.start_client()
    rpc_client_started.set()


questions_topic = app.topic(f"pattern-{PREFIX}-questions", value_type=int)


@app.agent(questions_topic)
async def questions(stream: Any) -> None:
    async for value in stream:
        # Faust: an ask racing start_client() leaves the client's consumer with nothing to
        # subscribe to (its conductor crashes), so the app waits for the client first
        await rpc_client_started.wait()
        out("rpc", [value, await times_ten.ask(value=value)])
