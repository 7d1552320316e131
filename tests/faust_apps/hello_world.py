import agentstream as faust

app = faust.App(
    "faust-hello-world",
    broker="kafka://localhost:9092",
    value_serializer="raw",
)

greetings_topic = app.topic("faust-greetings")


@app.agent(greetings_topic)
async def greet(greetings):
    async for greeting in greetings:
        print(f"GREETING: {greeting.decode()}")
