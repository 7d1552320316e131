import agentstream as faust

app = faust.App("faust-timer", broker="kafka://localhost:9092", topic_partitions=1)

ticks_topic = app.topic("faust-ticks", value_type=int)
state = {"n": 0}


@app.timer(interval=0.3)
async def produce_tick():
    state["n"] += 1
    await ticks_topic.send(value=state["n"])


@app.agent(ticks_topic)
async def print_ticks(ticks):
    async for tick in ticks:
        print(f"TICK {tick}")


@app.task
async def on_started():
    print("APP TASK RAN")


@app.crontab("*/1 * * * *")
async def every_minute():
    print("CRON FIRED")


@app.service
class Heartbeat(faust.Service):
    async def on_start(self):
        print("HEARTBEAT SERVICE STARTING")

    async def on_stop(self):
        print("HEARTBEAT SERVICE STOPPING")

    @faust.Service.task
    async def _background(self):
        while not self.should_stop:
            print("HEARTBEAT SERVICE WAKING UP")
            await self.sleep(0.5)
