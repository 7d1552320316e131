"""Scenario of Faust's examples/task_queue.py: a Celery-like queue. Tasks are Records with a
Sequence and a Mapping field, ids from ``faust.uuid()``, the agent typed ``faust.Stream[Request]``.
Faust's example sends random numbers; these are ``add(i, 2*i)`` so results are checkable."""

from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from itertools import count
from typing import Any

import agentstream as faust


class Request(faust.Record):
    id: str
    name: str
    arguments: Sequence
    keyword_arguments: Mapping

    async def __call__(self) -> Any:
        return await self.handler(*self.arguments, **self.keyword_arguments)

    @property
    def handler(self) -> Callable[..., Awaitable]:
        return task_registry[self.name]


app = faust.App("fx-celery", broker="kafka://localhost:9092", topic_partitions=2)
task_queue_topic = app.topic("fx-tasks", value_type=Request)
task_registry: MutableMapping[str, Callable[..., Awaitable]] = {}


@app.agent(task_queue_topic)
async def process_task(tasks: faust.Stream[Request]) -> None:
    async for task in tasks:
        result = await task()
        print(f"Result of {task.name}{tuple(task.arguments)} is: {result!r}")


class Task:
    def __init__(self, fun: Callable[..., Awaitable], *, name: str = None) -> None:
        self.fun = fun
        self.name = name or fun.__qualname__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fun(*args, **kwargs)

    async def delay(self, *args: Any, **kwargs: Any) -> Any:
        return await self.apply_async(args, kwargs)

    async def apply_async(self, args: Sequence, kwargs: Mapping, id: str = None, **options: Any) -> None:
        id = id or faust.uuid()
        return await process_task.send(value=Request(id=id, name=self.name, arguments=args, keyword_arguments=kwargs))


def task(fun: Callable) -> Task:
    t = Task(fun)
    task_registry[t.name] = t
    return t


@task
async def add(x: int, y: int) -> int:
    return x + y


_counter = count()


@app.timer(0.2)
async def _send_tasks() -> None:
    i = next(_counter)
    if i < 5:
        await add.delay(i, 2 * i)
