"""Scenario of Faust's examples/tableofset.py: a SetTable fed by a joining and a leaving topic,
CLI commands that send to them, and a timer that prints ``table.as_ansitable()``."""

import agentstream as faust
from agentstream.faust.cli import argument

app = faust.App(
    "fx-table-of-sets",
    broker="kafka://localhost:9092",
    origin="tests.faust_examples.tableofset",
    topic_partitions=4,
    version=2,
)
table = app.SetTable("people", value_type=str)
joining_topic = app.topic("fx-people-joining", key_type=str, value_type=str)
leaving_topic = app.topic("fx-people-leaving", key_type=str, value_type=str)


@app.agent(joining_topic)
async def join(stream):
    async for key, name in stream.items():
        print(f"- {name.capitalize()} joined {key}")
        table[key].add(name)
        print(f"TABLE CUR {key}: {sorted(table[key])!r}")


@app.agent(leaving_topic)
async def leave(stream):
    async for key, name in stream.items():
        print(f"- {name.capitalize()} left {key}")
        table[key].discard(name)
        print(f"TABLE CUR {key}: {sorted(table[key])!r}")


@app.command(argument("location"), argument("name"))
async def joining(self, location: str, name: str):
    await joining_topic.send(key=location, value=name)


@app.command(argument("location"), argument("name"))
async def leaving(self, location: str, name: str):
    await leaving_topic.send(key=location, value=name)


@app.timer(1.0)
async def _dump():
    print(f"TABLE NOW:\n{table.as_ansitable(sort=True)}")
