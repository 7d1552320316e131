"""``agentstream.Service``: the part of mode's ``Service`` that Faust apps use.

Faust apps subclass ``faust.Service`` for long-running helpers started with the worker
(``@app.service``): ``on_start``/``on_started``/``on_stop``/``on_shutdown`` hooks, background
methods marked ``@Service.task`` or ``@Service.timer(seconds)``, ``self.sleep()`` that returns
early on stop, and ``add_dependency()`` for child services. mode itself (its supervisors,
beacons, signals) is not needed for that, so this is a plain asyncio class.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from .durations import Seconds, to_seconds
from .faust_arguments import check

log = logging.getLogger(__name__)

__all__ = ["Service"]

F = TypeVar("F", bound=Callable[..., Any])
_MARK = "_agentstream_service_background"


class Service:
    """Base class of app services: override the ``on_*`` hooks; mark background methods."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        check("Service", **kwargs)  # mode's loop=/beacon=: do not apply (logged once); anything else: TypeError
        self._dependencies: list[Service] = []
        self._futures: list[asyncio.Future[Any]] = []
        self._stopped: asyncio.Event | None = None
        self._started = False
        self._stopping = False
        self.crash_reason: BaseException | None = None

    @property
    def log(self) -> logging.LoggerAdapter[logging.Logger]:
        """Faust's ``self.log``: a logger that prefixes lines with the service's name."""
        logger = logging.getLogger(type(self).__module__)
        return _ServiceLog(logger, {"service": self.shortlabel})

    # -- decorators (used on methods of subclasses) --------------------------------------------
    @staticmethod
    def task(fun: F) -> F:
        """Run ``async def method(self)`` in the background while the service runs."""
        setattr(fun, _MARK, None)
        return fun

    @staticmethod
    def timer(interval: Seconds) -> Callable[[F], F]:
        """Run ``async def method(self)`` every ``interval`` seconds while the service runs."""
        secs = to_seconds(interval)

        def _decorate(fun: F) -> F:
            setattr(fun, _MARK, secs)
            return fun

        return _decorate

    # -- hooks ---------------------------------------------------------------------------------------
    async def on_first_start(self) -> None: ...
    async def on_start(self) -> None: ...
    async def on_started(self) -> None: ...
    async def on_stop(self) -> None: ...
    async def on_shutdown(self) -> None: ...

    # -- state -----------------------------------------------------------------------------------------
    @property
    def should_stop(self) -> bool:
        return self._stopping

    @property
    def started(self) -> bool:
        return self._started

    @property
    def label(self) -> str:
        return type(self).__name__

    @property
    def shortlabel(self) -> str:
        return self.label

    def add_dependency(self, service: Service) -> Service:
        """A child started before this service's ``on_started`` and stopped after its ``on_stop``."""
        self._dependencies.append(service)
        return service

    async def add_runtime_dependency(self, service: Service) -> Service:
        self.add_dependency(service)
        if self._started:
            await service.start()
        return service

    def add_future(self, coro: Awaitable[Any]) -> asyncio.Future[Any]:
        """Run ``coro`` until it ends or the service stops."""
        fut = asyncio.ensure_future(self._guard(coro))
        self._futures.append(fut)
        return fut

    async def _guard(self, coro: Awaitable[Any]) -> Any:
        try:
            return await coro
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.crash_reason = exc
            log.exception("service %s: background task failed: %s", self.label, exc)
            return None

    async def sleep(self, seconds: Seconds) -> None:
        """Sleep, waking early when the service stops (so loops over ``should_stop`` end quickly)."""
        stopped = self._stop_event()
        try:
            await asyncio.wait_for(stopped.wait(), to_seconds(seconds))
        except TimeoutError:
            pass

    async def wait_until_stopped(self) -> None:
        await self._stop_event().wait()

    def _stop_event(self) -> asyncio.Event:
        if self._stopped is None:
            self._stopped = asyncio.Event()
        return self._stopped

    # -- lifecycle -------------------------------------------------------------------------------------
    async def start(self) -> None:
        if self._started:
            return
        self._stopping = False
        self._stop_event().clear()
        await self.on_first_start()
        await self.on_start()
        for child in self._dependencies:
            await child.start()
        for name in dir(type(self)):
            fun = getattr(type(self), name, None)
            if callable(fun) and hasattr(fun, _MARK):
                interval = getattr(fun, _MARK)
                bound = getattr(self, name)
                self.add_future(bound() if interval is None else self._every(interval, bound))
        self._started = True
        await self.on_started()

    async def _every(self, interval: float, fun: Callable[[], Awaitable[Any]]) -> None:
        while not self._stopping:
            await self.sleep(interval)
            if self._stopping:
                return
            res = fun()
            if inspect.isawaitable(res):
                await res

    async def stop(self) -> None:
        if not self._started:
            return
        self._stopping = True
        self._stop_event().set()
        await self.on_stop()
        for fut in self._futures:
            fut.cancel()
        await asyncio.gather(*self._futures, return_exceptions=True)
        self._futures.clear()
        for child in reversed(self._dependencies):
            await child.stop()
        self._started = False
        await self.on_shutdown()

    async def restart(self) -> None:
        await self.stop()
        await self.start()

    async def __aenter__(self) -> Service:
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.stop()

    def __repr__(self) -> str:
        return f"<{self.label}: {'running' if self._started else 'stopped'}>"


class _ServiceLog(logging.LoggerAdapter):  # type: ignore[type-arg]
    """``[Service] message``, as Faust's service logger writes it."""

    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        return f"[{(self.extra or {}).get('service')}] {msg}", kwargs
