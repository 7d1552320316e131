"""Scenario of Faust's examples/leader.py: a timer that runs on the group leader only, sending raw
values to an agent (``value_serializer='raw'``: the agent sees bytes, as in Faust)."""

import random

import agentstream as faust

app = faust.App("fx-leader", broker="kafka://localhost:9092", value_serializer="raw", topic_partitions=1)


@app.timer(0.5, on_leader=True)
async def publish_greetings():
    print("PUBLISHING ON LEADER!")
    await say.send(value=str(random.random()))


@app.agent()
async def say(greetings):
    async for greeting in greetings:
        print(greeting)
