"""Scenario of Faust's examples/concurrency.py: ``@app.agent(topic, concurrency=N)`` handling
records with N instances sharing the worker's partitions, at most N records in flight (Faust's example fetches a web page per record; this one
sleeps instead, as the tests have no internet)."""

import asyncio

import agentstream as faust


class Record(faust.Record):
    value: int


app = faust.App("fx-concurrency", broker="kafka://localhost:9092", topic_partitions=2)
topic = app.topic("fx-concurrency", value_type=Record)


@app.agent(topic, concurrency=5)
async def mytask(records):
    async for record in records:
        await asyncio.sleep(0.01)
        print(f"HANDLED {record.value}")


@app.command()
async def producer():
    for i in range(20):
        await topic.send(value=Record(value=i))
