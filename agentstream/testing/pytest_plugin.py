"""pytest fixtures for agentstream apps: ``app_harness`` and ``agent_context``.

Installed with agentstream (the ``pytest11`` entry point ``agentstream.testing.pytest_plugin``), so a
project's tests use them without a conftest::

    async def test_totals(app_harness):
        async with app_harness(app, virtual_time=True) as h:
            await h.send("orders", Order("o1", "c1", 9.5), key="o1")
            assert h.table("totals") == {"c1": 9.5}

    async def test_double(agent_context):
        async with agent_context(double) as ctx:
            await ctx.put(21)
            assert ctx.results == [42]

``app_harness(app, **options)`` is :class:`~agentstream.testing.AppHarness` (same options); without
``app`` it takes the test's ``app`` fixture. ``agent_context(agent, **options)`` is
``agent.test_context(**options)``. Both are plain (not async) fixtures: they work with any
pytest-asyncio mode and loop scope, and the ``async with`` in the test starts and stops the run.

Loading the plugin imports nothing of agentstream's runtime: the harness is imported when a test first
asks for it, so projects that have agentstream installed but do not use the fixtures pay nothing for
them. Turn it off with ``-p no:agentstream.testing.pytest_plugin``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ..agents.agent import Agent
    from ..agents.test_context import AgentTestContext
    from ..app import App
    from .harness import AppHarness

__all__ = ["HarnessFactory", "AgentContextFactory", "app_harness", "agent_context"]


class HarnessFactory:
    """What the ``app_harness`` fixture gives: call it to make an :class:`AppHarness`."""

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self._request = request
        self.harnesses: list[AppHarness] = []  # every harness this test made, in order

    def __call__(self, app: App | None = None, /, **options: Any) -> AppHarness:
        """``AppHarness(app, **options)`` (``virtual_time=True``, ``start=``, settings...); ``app``
        defaults to the test's ``app`` fixture (an ``async`` one must be among the test's arguments
        too: it cannot be set up from inside the running test)."""
        from .harness import AppHarness

        if app is None:
            try:
                app = self._request.getfixturevalue("app")
            except pytest.FixtureLookupError:
                raise TypeError(
                    "app_harness() needs the app to run: pass it (app_harness(app)) or define an `app` fixture"
                ) from None
        harness = AppHarness(app, **options)
        self.harnesses.append(harness)
        return harness


class AgentContextFactory:
    """What the ``agent_context`` fixture gives: call it with an agent for its ``test_context()``."""

    def __init__(self) -> None:
        self.contexts: list[AgentTestContext] = []

    def __call__(self, agent: Agent, /, **options: Any) -> AgentTestContext:
        context = agent.test_context(**options)
        self.contexts.append(context)
        return context


@pytest.fixture
def app_harness(request: pytest.FixtureRequest) -> HarnessFactory:
    """Make harnesses: ``async with app_harness(app, virtual_time=True) as h: ...``."""
    return HarnessFactory(request)


@pytest.fixture
def agent_context() -> AgentContextFactory:
    """Run one agent in-process: ``async with agent_context(agent) as ctx: await ctx.put(value)``."""
    return AgentContextFactory()
