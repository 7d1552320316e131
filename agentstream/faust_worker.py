"""``faust.Worker``: run a worker from a script. It drives the CLI's runner and the real worker, so it
sits above both, at the top of the package (the rest of the Faust translation, in
:mod:`agentstream.faust_compat`, sits below the App that calls it)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from .faust_compat import flush_deferred_logs, service_runner

if TYPE_CHECKING:
    from .app import App

__all__ = ["Worker"]


class Worker:
    """``faust.Worker(app, loglevel='info').execute_from_commandline()``: run a worker from a script."""

    def __init__(self, app: "App", *services: Any, loglevel: str | int | None = None, logfile: str | None = None,
                 web_port: int | None = None, web_bind: str | None = None, web_host: str | None = None,
                 **kwargs: Any) -> None:
        self.app = app
        self.services = services
        self.loglevel = logging.getLevelName(loglevel) if isinstance(loglevel, int) else loglevel
        self.logfile = logfile
        changes: dict[str, Any] = {}
        if web_port is not None:
            changes["web_port"] = web_port
        if web_bind or web_host:
            changes["web_host"] = web_bind or web_host
        self.changes = changes

    def execute_from_commandline(self) -> None:
        """Run until SIGTERM/SIGINT; exits the process with the worker's exit code."""
        from .cli import _run, setup_logging  # imported on use, as before: a script may never run it
        from .web import run_worker
        from .worker.worker import Worker as _Worker

        if self.changes:
            self.app.settings = self.app.settings.replace(**self.changes)
        for svc in self.services:
            self.app.startup_tasks.append(service_runner(svc))
        setup_logging(str(self.loglevel or self.app.settings.loglevel), self.logfile)
        flush_deferred_logs()  # the Faust-setting notices, once, at worker start

        async def _go() -> int:
            return await run_worker(_Worker(self.app, install_signal_handlers=True))

        raise SystemExit(int(_run(_go())))
