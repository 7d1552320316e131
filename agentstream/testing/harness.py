""":class:`AppHarness`: a whole app on a private memory broker inside the test's event loop.

``wait_idle()`` returns when every record sent so far has been fully handled and committed.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Any

from ..agents.test_context import read_topic, use_memory
from ..transport.base import TP
from ..transport.memory import MemoryTransport

if TYPE_CHECKING:
    from ..app import App

__all__ = ["AppHarness"]


class AppHarness:
    """Run a whole app on a private memory broker inside the test's event loop."""

    def __init__(self, app: App, **settings: Any) -> None:
        self.app = app
        self.settings = settings
        self.worker: Any = None
        self.web: Any = None  # the app's web server (agentstream.web.Web) while it runs
        self._saved: tuple[Any, Any] | None = None

    async def __aenter__(self) -> AppHarness:
        from ..web import serve
        from ..worker.worker import Worker

        self._saved = use_memory(self.app, f"app-test-{uuid.uuid4().hex[:8]}")
        changes = {
            "commit_interval": 0.05,
            "web_port": 0,
            **self.settings,
        }  # web: a free port (web_enabled=False: none)
        self.app.settings = self.app.settings.replace(**changes)
        self.worker = Worker(self.app)
        self.web = serve(self.worker)  # beside the worker, as the CLI runs it (None: web_enabled=False)
        await self.worker.start()
        await asyncio.wait_for(self.worker.assigned.wait(), 10)
        return self

    async def send(
        self,
        topic: str,
        value: Any = None,
        *,
        key: Any = None,
        partition: int | None = None,
        timestamp: float | None = None,
    ) -> None:
        t = self.app.topics.get(topic) or self.app.topic(topic)
        await t.send(key=key, value=value, partition=partition, timestamp=timestamp)

    async def wait_idle(self, timeout: float = 30.0) -> None:
        """Until every record in every source topic is handled and committed (bounded by ``timeout``)."""
        transport = self.app.transport
        assert isinstance(transport, MemoryTransport)
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            if self.worker.crashed is not None:
                raise self.worker.crashed
            await self.worker.commit()
            ends = transport.end_offsets([tp for tp in self._source_partitions()])
            consumer = self.worker.consumer
            committed = {tp: await consumer.committed(tp) for tp in ends}
            if all((committed[tp] or 0) >= end for tp, end in ends.items()):
                return
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"app did not catch up: ends={ends} committed={committed}")
            await asyncio.sleep(0.02)

    def _source_partitions(self) -> list[TP]:
        return sorted(self.worker.consumer.assignment())

    def read(self, topic: str) -> list[tuple[Any, Any]]:
        return read_topic(self.app, topic)

    def table(self, name: str) -> dict[Any, Any]:
        return self.app.tables[name].as_dict()  # type: ignore[no-any-return]

    async def __aexit__(self, *exc: Any) -> None:
        if self.worker is not None:
            await self.worker.stop()
        assert self._saved is not None
        self.app.settings, self.app._transport = self._saved
