"""``faust.worker`` and ``agentstream.Worker``: the worker that runs an app, with Faust's way to start it
from a script.

There is one worker class: this one *is* the runtime worker (:class:`agentstream.worker.worker.Worker`,
which the CLI and the test harness build), with Faust's constructor arguments and
``execute_from_commandline()`` added. ``await Worker(app).run()`` runs it in async code;
``Worker(app, loglevel="info").execute_from_commandline()`` runs ``agentstream worker`` for the app
(the CLI's logging, signal handling and event loop), exactly what ``agentstream -A module worker``
runs. It sits at the top of the package: it drives the CLI, which sits above the worker.
"""

from __future__ import annotations

import logging
from typing import Any, NoReturn

from agentstream.background import service_runner
from agentstream.cli import main
from agentstream.faust_arguments import check
from agentstream.worker.worker import Worker as _RuntimeWorker

__all__ = ["Worker"]


class Worker(_RuntimeWorker):
    """``Worker(app, *services, loglevel='info').execute_from_commandline()``, as in Faust.

    ``services`` (:class:`agentstream.Service` subclasses or instances) start and stop with the
    worker; ``web_port``/``web_bind``/``web_host``, ``debug``, ``logging_config`` and ``loghandlers``
    change the app's settings and ``sensors`` are added to ``app.sensors``. Faust's other keyword
    arguments are refused or do not apply, as :mod:`agentstream.faust_arguments` lists them.
    """

    def __init__(
        self,
        app: Any,
        *services: Any,
        loglevel: str | int | None = None,
        logfile: str | None = None,
        web_port: int | None = None,
        web_bind: str | None = None,
        web_host: str | None = None,
        install_signal_handlers: bool = True,
        **kwargs: Any,
    ) -> None:
        sensors = kwargs.pop("sensors", None) or ()
        debug, logging_config, loghandlers = (kwargs.pop(k, None) for k in ("debug", "logging_config", "loghandlers"))
        extra: dict[str, Any] = {}  # Faust's Worker arguments that stand for app settings
        for arg, setting in (
            ("blocking_timeout", "blocking_timeout"),
            ("redirect_stdouts", "worker_redirect_stdouts"),
            ("redirect_stdouts_level", "worker_redirect_stdouts_level"),
        ):
            value = kwargs.pop(arg, None)
            if value is not None:
                extra[setting] = value
        check("Worker", **kwargs)  # Faust's other Worker options: TypeError naming them (quiet, loop: logged)
        changes: dict[str, Any] = {}
        if extra:
            changes["extra"] = {**app.settings.extra, **extra}
        if debug:
            changes["debug"] = True
        if logging_config is not None:
            changes["logging_config"] = logging_config
        if loghandlers is not None:
            changes["loghandlers"] = loghandlers
        if web_port is not None:
            changes["web_port"] = web_port
        if web_bind:
            changes["web_bind"] = web_bind  # Faust's: where to listen
        if web_host is not None:
            changes["web_host"] = web_host  # Faust's: the name others reach it by
        if changes:
            app.settings = app.settings.replace(**changes)
        for sensor in sensors:
            app.sensors.add(sensor)
        for service in services:
            app.startup_tasks.append(service_runner(service))
        self.loglevel = logging.getLevelName(loglevel) if isinstance(loglevel, int) else loglevel
        self.logfile = logfile
        super().__init__(app, install_signal_handlers=install_signal_handlers)

    async def run(self) -> int:
        """Run with the web server the settings ask for beside it (as the CLI does), until stopped."""
        from agentstream.web.runner import serve  # here: ``import agentstream`` must not load aiohttp

        serve(self)
        return await super().run()

    def execute_from_commandline(self) -> NoReturn:
        """Run until SIGTERM/SIGINT; exits the process with the worker's exit code."""
        argv = ["-l", str(self.loglevel)] if self.loglevel else []
        argv.append("worker")
        if self.logfile:
            argv += ["-f", self.logfile]
        raise SystemExit(main(argv, app=self.app))
