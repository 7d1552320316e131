"""The in-process test harness: run one agent, or a whole app, without a broker.

``agent.test_context()`` hands values straight to one agent instance (:mod:`agentstream.agents.test_context`).
:class:`AppHarness` runs a real worker on a private ``memory://`` broker in the test's event loop, optionally
on virtual time (``AppHarness(app, virtual_time=True)``, ``await h.advance(seconds)``), and reads what the run
did (:mod:`.assertions`). :mod:`.pytest_plugin` gives pytest the ``app_harness`` and ``agent_context`` fixtures.

The names load on first use (PEP 562), so that pytest loading the plugin, a submodule of this package,
imports neither the worker nor the memory broker for projects that do not use the fixtures.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..agents.test_context import AgentTestContext, use_memory
    from .assertions import DeadLetter, SentRecord, TableContents, Yielded
    from .harness import AppHarness

__all__ = ["AgentTestContext", "AppHarness", "DeadLetter", "SentRecord", "TableContents", "Yielded", "use_memory"]

_WHERE = {
    "AgentTestContext": "..agents.test_context",
    "use_memory": "..agents.test_context",
    "AppHarness": ".harness",
    "DeadLetter": ".assertions",
    "SentRecord": ".assertions",
    "TableContents": ".assertions",
    "Yielded": ".assertions",
}


def __getattr__(name: str) -> object:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
