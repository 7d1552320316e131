"""The scenario registry: ``@scenario("the issue item it covers")`` on an ``async def`` that builds
a small Faust app, runs it and returns what it observed (printed lines are captured too)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

Body = Callable[[], Awaitable[Any]]


@dataclass(frozen=True)
class Scenario:
    name: str
    item: str
    body: Body
    broker: bool  # needs the real broker (its URL in $COMPAT_BROKER)
    timeout: float | None = None  # seconds it may take (None: the runner's TIMEOUT); starting a whole app takes more


SCENARIOS: dict[str, Scenario] = {}


def scenario(item: str, *, broker: bool = False, timeout: float | None = None) -> Callable[[Body], Body]:
    def register(body: Body) -> Body:
        name = body.__name__
        assert name not in SCENARIOS, name
        SCENARIOS[name] = Scenario(name, item, body, broker, timeout)
        return body

    return register
