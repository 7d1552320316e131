"""Running a worker with its web server beside it: what the CLI's ``worker`` command, ``faust.Worker``
and the test harness do, and what a script building its own :class:`~agentstream.worker.worker.Worker`
calls (``await run_worker(Worker(app))``) to get the web server its settings ask for.

The worker never constructs the web server (it sits below the web layer); it starts the servers
attached to it at the right step: producer -> web -> tables -> consumer -> agents, stopping in
reverse, so the group learns this worker's web address before it joins.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .server import Web
from .service_server import ServiceServer

if TYPE_CHECKING:
    from ..worker.worker import Worker

__all__ = ["serve", "run_worker"]


def serve(worker: Worker) -> Web | None:
    """Attach the web server the worker's settings ask for (None with ``web_enabled=False``, or
    when the app registered its own with ``app.web_server(...)``, attached instead);
    call before the worker starts. A port that cannot be bound fails the start, naming ``web_port``.
    Idempotent: a worker that has a web server attached keeps it (``run_worker(faust.Worker(app))``
    would otherwise bind ``web_port`` twice)."""
    s = worker.settings
    if not s.web_enabled:
        return None
    for server in worker.servers:
        if isinstance(server, Web):
            return server
        if isinstance(server, ServiceServer):
            return None
    registered = getattr(worker.app, "web_server_service", None)
    if registered is not None:  # app.web_server(...): it serves HTTP, agentstream's server does not
        worker.serve(ServiceServer(registered, fallback=f"{s.web_host}:{worker.web_port}"))
        return None
    web = Web(worker.app, worker, host=s.web_bind_address(), port=worker.web_port)
    worker.serve(web)
    return web


async def run_worker(worker: Worker) -> int:
    """``worker.run()`` with its web server: runs until stopped, returns the exit code."""
    serve(worker)
    return await worker.run()
