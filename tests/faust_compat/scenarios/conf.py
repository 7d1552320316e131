"""Issue 40: app.conf by Faust's names, assignments, Faust's older names, App(config_source=,
monitor=), explicit None, datadir's {conf.name}; Table hooks, table.data/info/changelog_topic_name,
windowed tables' on_recover/as_ansitable; app.Worker(). (stream.echo('name') derives from the
stream's source topic, which Faust's test_context does not have: tests/unit/tables/test_faust_table_api40.py)"""

from __future__ import annotations

from typing import Any

import faust

from .. import kit
from ..registry import scenario


@scenario("app.conf reads Faust's names (and older names, datadir's {conf.name}, None as the default)")
async def conf_faust_names() -> Any:
    app = faust.App(
        "compat-conf",
        broker="kafka://localhost:9092",
        broker_commit_interval=0.5,
        default_partitions=3,
        num_standby_replicas=2,
        datadir="/tmp/{conf.name}-data",
        value_serializer="raw",
        broker_credentials=None,
        canonical_url=None,
    )
    conf = app.conf
    return {
        "commit": conf.broker_commit_interval,
        "partitions": conf.topic_partitions,
        "standbys": conf.table_standby_replicas,
        "datadir": str(conf.datadir),
        "value_serializer": conf.value_serializer,
        "name": conf.name,
        "id": conf.id,
        "credentials": conf.broker_credentials,
    }


@scenario("app.conf.x = ... (the on_configured style) takes effect")
async def conf_assignment() -> Any:
    app = faust.App("compat-conf-set", broker="kafka://localhost:9092")
    app.conf.broker_commit_interval = 4.0
    app.conf.topic_partitions = 5
    app.conf.value_serializer = "raw"
    return [app.conf.broker_commit_interval, app.conf.topic_partitions, app.conf.value_serializer]


@scenario("App(config_source=...) and App(monitor=...) are honoured")
async def app_config_source_and_monitor() -> Any:
    from faust.sensors import Monitor

    class Config:
        topic_partitions = 7
        broker_commit_interval = 0.25

    monitor = Monitor()
    app = faust.App("compat-conf-src", broker="kafka://localhost:9092", config_source=Config, monitor=monitor)
    return [app.conf.topic_partitions, app.conf.broker_commit_interval, app.monitor is monitor]


@scenario("A Table subclass's on_key_get/on_key_set/on_key_del hooks are called")
async def table_subclass_hooks() -> Any:
    class AuditedTable(faust.Table):
        def on_key_get(self, key: Any) -> None:
            print("get", key)
            super().on_key_get(key)

        def on_key_set(self, key: Any, value: Any) -> None:
            print("set", key, value)
            super().on_key_set(key, value)

        def on_key_del(self, key: Any) -> None:
            print("del", key)
            super().on_key_del(key)

    app = faust.App("compat-thooks", broker="kafka://localhost:9092", Table=AuditedTable)
    table = app.Table("compat-thooks-t", default=int)
    src = app.topic("compat-thooks-src", value_type=str)

    @app.agent(src)
    async def count(stream: Any) -> Any:
        async for word in stream:
            table[word] = 1
            table[word] = table[word] + 1
            if word == "drop":
                del table[word]
            yield word

    kit.setup(app)
    async with count.test_context() as agent:
        for w in ("a", "drop"):
            await agent.put(w, key=w)
    return type(table).__name__


@scenario("table.data, table.info(), table.changelog_topic_name")
async def table_data_info() -> Any:
    app = faust.App("compat-tinfo", broker="kafka://localhost:9092")
    table = app.Table("compat-tinfo-t", default=int, help="totals")
    src = app.topic("compat-tinfo-src", value_type=str)

    @app.agent(src)
    async def count(stream: Any) -> Any:
        async for word in stream:
            table[word] += 1
            yield word

    kit.setup(app)
    async with count.test_context() as agent:
        for w in ("x", "x", "y"):
            await agent.put(w, key=w)
        data = sorted(dict(table.data).items())
    info = table.info()
    return {
        "data": data,
        "changelog": table.changelog_topic_name,
        "info": [info["name"], info["app"] is app, info["default"] is int, info["partitions"]],
    }


@scenario("a windowed table's on_recover, changelog_topic_name and as_ansitable")
async def windowed_table_api() -> Any:
    app = faust.App("compat-wapi", broker="kafka://localhost:9092")
    windowed = app.Table("compat-wapi-t", default=int).tumbling(60.0, expires=3600.0, key_index=True)

    async def recovered() -> None:
        pass

    returned = windowed.on_recover(recovered)
    text = windowed.relative_to_now().as_ansitable(title="{table.name} now")
    return {
        "on_recover": returned is recovered,
        "changelog": windowed.table.changelog_topic_name,
        "text": isinstance(text, str),  # the layout differs (docs/migrating-from-faust.md)
    }


@scenario("app.Worker() makes the app's worker (Faust's Worker class)")
async def app_worker() -> Any:
    app = faust.App("compat-appworker", broker="kafka://localhost:9092")
    worker = app.Worker(loglevel="info")
    return [isinstance(worker, faust.Worker), worker.app is app]


@scenario("app.agents is a mapping of the agents by name")
async def app_agents_mapping() -> Any:
    from collections.abc import Mapping

    app = faust.App("compat-agentmap", broker="kafka://localhost:9092")

    @app.agent(app.topic("compat-agentmap-src"))
    async def first(stream: Any) -> None:
        async for _ in stream:
            pass

    return [
        isinstance(app.agents, Mapping),
        app.agents[first.name] is first,
        list(app.agents) == [first.name],
        list(app.agents.values()) == [first],
    ]


@scenario("Faust settings honoured: id_format (read back; the id as Faust names it), HttpClient makes app.http_client")
async def settings_id_format_http_client() -> Any:
    import warnings

    import aiohttp

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # aiohttp discourages subclassing its session

        class Session(aiohttp.ClientSession):
            pass

    app = faust.App(
        "compat-idf", broker="kafka://localhost:9092", version=3, id_format="{id}.ver{self.version}", HttpClient=Session
    )
    client = app.http_client
    got = {
        "id": app.conf.id,
        "id_format": app.conf.id_format,
        "client": type(client).__name__,
        "same": app.http_client is client,
    }
    await client.close()
    return got
