"""Scenario of Faust's examples/advanced/service.py: a Service started with the app (logging
with ``self.log``), an agent on its own topic (``@app.agent(value_type=str)``), a timer sending."""

import agentstream as faust

app = faust.App("fx-service", broker="kafka://localhost:9092", topic_partitions=1)


@app.service
class MyService(faust.Service):
    async def on_start(self) -> None:
        self.log.info("STARTED")

    async def on_stop(self) -> None:
        self.log.info("STOPPED")


@app.agent(value_type=str)
async def consumer(stream):
    async for message in stream:
        print(f"Received: {message!r}")


@app.timer(0.5)
async def producer():
    await consumer.send(value="hello")
