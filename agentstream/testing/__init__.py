"""The in-process test harness: run one agent, or a whole app, without a broker.

``agent.test_context()`` hands values straight to one agent instance (:mod:`agentstream.agents.test_context`).
:class:`AppHarness` runs a real worker on a private ``memory://`` broker in the test's event loop, optionally
on virtual time (``AppHarness(app, virtual_time=True)``, ``await h.advance(seconds)``).
"""

from ..agents.test_context import AgentTestContext, use_memory
from .harness import AppHarness

__all__ = ["AgentTestContext", "AppHarness", "use_memory"]
