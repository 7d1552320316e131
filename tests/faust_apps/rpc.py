import agentstream as faust
from agentstream.cli import option  # Faust: from faust.cli import option

app = faust.App("faust-rpc", broker="kafka://localhost:9092", topic_partitions=2)


class Add(faust.Record):
    a: int
    b: int


@app.agent(value_type=Add)
async def adder(requests):
    async for request in requests:
        yield request.a + request.b


@app.command(
    option("--a", type=int, default=1, help="First number"),
    option("--b", type=int, default=2, help="Second number"),
)
async def call_add(self, a: int, b: int) -> None:
    """Ask the adder agent for a + b."""
    result = await adder.ask(Add(a=a, b=b))
    self.say(f"RESULT {result}")
