"""The compatibility scenarios that need a running worker on the real broker, as one Faust app
(``import faust``). Run under Faust (``faust -A tests.faust_compat.worker_app worker``) and under
agentstream (``python -m tests.faust_compat.agentstream_cli -A tests.faust_compat.worker_app worker``),
each with its own ``$COMPAT_PREFIX`` so both share one broker. Observations are printed as
``COMPAT-OUT <scenario> <json>`` lines; pages answer JSON; tests/integration/test_faust_compat.py
drives both and compares."""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import faust
from faust import web

PREFIX = os.environ.get("COMPAT_PREFIX", "x")
CONCURRENCY_RECORDS = 16
# made with 4 partitions by the test (set-manager: the SetTable's manager topic)
SOURCE_TOPICS = ("concurrency", "words", "clicks", "set-ops", "set-manager", "echo", "points", "preamble")


def out(name: str, value: Any) -> None:
    print(f"COMPAT-OUT {name} {json.dumps(value, sort_keys=True)}", flush=True)


def topic_name(name: str) -> str:
    return f"compat-{PREFIX}-{name}"


app = faust.App(
    f"compat-worker-{PREFIX}",
    broker=os.environ.get("COMPAT_BROKER", "kafka://localhost:9092"),
    table_cleanup_interval=0.5,
    topic_partitions=4,  # the test creates every source topic with 4 partitions before the workers start
)

# -- concurrency=4 over a 4-partition topic: at most 4 records in flight --------------------------
concurrency_topic = app.topic(topic_name("concurrency"), value_type=int, partitions=4)
_in_flight = 0
_max_in_flight = 0
_handled = 0
_instances = 0
_fed: set[int] = set()  # the instances (Faust's actors) that handled a record


@app.agent(concurrency_topic, concurrency=4)
async def limited(stream: Any) -> None:
    global _in_flight, _max_in_flight, _handled, _instances
    me = _instances  # the preamble: runs once per instance
    _instances += 1
    async for _value in stream:
        _fed.add(me)
        _in_flight += 1
        _max_in_flight = max(_max_in_flight, _in_flight)
        await asyncio.sleep(0.2)
        _in_flight -= 1
        _handled += 1
        if _handled == CONCURRENCY_RECORDS:
            out(
                "concurrency",
                # instances: how often the preamble ran (once per actor, never for discovery)
                {
                    "handled": _handled,
                    "max_in_flight": _max_in_flight,
                    "instances_fed": len(_fed),
                    "instances": _instances,
                },
            )


# -- agent code runs only to handle records: the preamble once per instance (issue 40, item 8), with a
# group_by too (concurrency=N without one: the `limited` agent above counts its preamble runs) -------
PREAMBLE_RECORDS = 8
preamble_topic = app.topic(topic_name("preamble"), value_type=int, partitions=4)
_preambles = 0
_regrouped: list[int] = []


# concurrency=1 given: Faust's one actor (Faust refuses group_by with concurrency>1; agentstream allows
# it). Without concurrency= agentstream runs an instance per partition's task (docs/agents-and-streams.md).
@app.agent(preamble_topic, concurrency=1)
async def regroup(stream: Any) -> None:
    global _preambles
    _preambles += 1  # the preamble: once per instance (Faust's actor), never for discovery or forwarding
    async for value in stream.group_by(lambda v: "even" if v % 2 == 0 else "odd", name="parity"):
        _regrouped.append(value)
        if len(_regrouped) == PREAMBLE_RECORDS:
            out("preamble", {"preambles": _preambles, "handled": sorted(_regrouped)})


# -- a table, Faust's table views and a table_route page -------------------------------------------
words_topic = app.topic(topic_name("words"), value_type=str)
counts = app.Table("compat_counts", default=int, help="Word counts.")


@app.agent(words_topic)
async def count_words(stream: Any) -> None:
    async for word in stream:  # keyed by the word: each word counted in its own partition
        counts[word] += 1


@app.page("/count/{word}/")
@app.table_route(table=counts, match_info="word")
async def get_count(view: web.View, request: web.Request, word: str) -> web.Response:
    return view.json({word: counts[word]})


# -- on_window_close fired by the table cleanup while the stream keeps running ---------------------
clicks_topic = app.topic(topic_name("clicks"), key_type=str, value_type=str)


def window_closed(key: Any, value: Any) -> None:
    if key[0] == "w":
        out("window_close", [key[0], value])  # value: the window's count (1: one "w" per window)


windows = app.Table("compat_windows", default=int, on_window_close=window_closed).tumbling(1.0, expires=1.0)


@app.agent(clicks_topic)
async def click(stream: Any) -> None:
    async for event in stream.events():
        windows[event.key] += 1


# -- SetTable with its manager: operations routed through its topic to the key's owner -------------
ops_topic = app.topic(topic_name("set-ops"), value_serializer="json")
try:
    # manager_topic_name: the default "<table>-setmanager" has no app prefix (in Faust and here), so
    # the two workers on the one broker would each apply the other's operations too: both sequences
    # applied leave k empty, and the page showed the expected {"x"} only between the two (a flake in
    # 1 of some 30 runs)
    sets: Any = app.SetTable("compat_sets", start_manager=True, manager_topic_name=topic_name("set-manager"))
except Exception as exc:  # reported as the scenario's result; the other scenarios go on
    sets = None
    out("set_table", {"error": type(exc).__name__})


@app.agent(ops_topic)
async def set_ops(stream: Any) -> None:
    async for op in stream:
        if sets is None:
            continue
        method = getattr(sets.manager, op["op"])
        await method(op["key"], *op.get("args", []))


@app.page("/set/{key}/")
async def get_set(view: web.View, request: web.Request, key: str) -> web.Response:
    return view.json(None if sets is None else sorted(sets[key]))


# -- a Topic subclass overriding on_value_decode_error, as Faust's docs show ------------------------
class Point(faust.Record):
    x: int


def _lenient_topic() -> Any:
    """The subclass and its topic (a failure to subclass or construct is the scenario's result)."""
    try:

        class LenientTopic(faust.Topic):
            async def on_value_decode_error(self, exc: Exception, message: Any) -> None:
                out("decode_error_hook", [type(exc).__name__, message.offset])

        return LenientTopic(app, topics=[topic_name("points")], value_type=Point)
    except Exception as exc:  # the other scenarios go on
        out("decode_error_hook", {"error": type(exc).__name__})
        return app.topic(topic_name("points"), value_type=Point)


@app.agent(_lenient_topic())
async def points(stream: Any) -> None:
    async for point in stream:
        out("point", point.x)


# -- `send @agent` from the command line -----------------------------------------------------------
echo_topic = app.topic(topic_name("echo"), value_type=str)


@app.agent(echo_topic)
async def echo(stream: Any) -> None:
    async for value in stream:
        out("echo", value)


# -- app.is_leader() in a worker -------------------------------------------------------------------
_leader_seen: list[bool] = []


@app.timer(0.5)
async def leader_check() -> None:
    leader = app.is_leader()
    if not _leader_seen or _leader_seen[-1] != leader:
        _leader_seen.append(leader)
        out("is_leader", leader)


# -- web views (issue 40 item 9): raised web errors, HEAD/OPTIONS, helpers' keywords, the web cache --------
class Missing(web.View):
    async def get(self, request: web.Request) -> web.Response:
        raise self.NotFound("no such thing", thing="x")

    async def post(self, request: web.Request) -> web.Response:
        raise self.ValidationError()


@app.page("/views/missing/")
class MissingPage(Missing):
    pass


@app.page("/views/helpers/{kind}/")
class Helpers(web.View):
    async def get(self, request: web.Request, kind: str) -> web.Response:
        if kind == "json":
            return self.json({"made": True}, status=201, headers={"X-Compat": "1"})
        if kind == "text":
            return self.text("plain words", status=202, content_type="text/csv")
        if kind == "error":
            return self.error(418, "a teapot", brewing=True)
        return self.notfound("gone away")

    async def options(self, request: web.Request, kind: str) -> web.Response:
        return self.json({"allow": ["GET", "OPTIONS"]})


views_blueprint = web.Blueprint("compat_views")
views_cache = views_blueprint.cache(timeout=60.0)
_cached_calls: list[int] = []


@views_blueprint.route("/counted/", name="counted")
class Counted(web.View):
    @views_cache.view()
    async def get(self, request: web.Request) -> web.Response:
        _cached_calls.append(1)
        return self.json({"calls": len(_cached_calls)})


views_blueprint.register(app, url_prefix="/views/cached/")
