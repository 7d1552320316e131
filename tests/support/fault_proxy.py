"""A loopback TCP proxy in front of the broker that delays, holds or cuts its traffic.

Why here and not in the ``agentstream`` package: only test drivers run it (the pytest process,
or the soak driver); worker subprocesses just connect to its port. Keeping it in test support
keeps network-fault code out of what users install.

Clients reach the broker through it only if the broker *advertises* the proxy's address (tansu's
``--advertised-listener-url``), or they reconnect straight to the broker after the metadata
exchange; :func:`proxied_broker_command` builds that command line.

Faults, all reversible and bounded:

* ``delay(upstream=..., downstream=...)``: each chunk waits that long (seconds, or a
  ``(low, high)`` range drawn per chunk) before it is forwarded; order is kept per direction.
* ``pause()``: hold all traffic in both directions (connections stay open, bytes queue up to a
  bound, then TCP back-pressure); ``resume()`` lets it flow again.
* ``cut()``: abort every open connection (clients see resets); the listener stays up.
* ``stop()``: stop listening and cut; ``start()`` again on the same port.

Bounded: loopback addresses only, at most ``max_connections`` at once (more are refused), at
most ``MAX_DELAY`` seconds per chunk, and a bounded queue per direction.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import random
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar
from unittest import mock

__all__ = ["FaultProxy", "ThreadedFaultProxy", "proxied_broker_command", "proxied_dev_broker", "MAX_DELAY"]

MAX_DELAY = 30.0
_CHUNK = 65536
_QUEUE_CHUNKS = 256  # per direction and connection: ~16 MiB at most, then back-pressure
Delay = float | tuple[float, float]
T = TypeVar("T")


def _check_loopback(host: str) -> None:
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback:
        raise ValueError(f"the fault proxy binds and connects to loopback addresses only, not {host!r}")


def _check_delay(delay: Delay) -> Delay:
    low, high = delay if isinstance(delay, tuple) else (delay, delay)
    if not 0 <= low <= high <= MAX_DELAY:
        raise ValueError(f"delay {delay!r} must be seconds in 0..{MAX_DELAY} (or a (low, high) range within it)")
    return delay


class _Connection:
    """One client connection and its upstream twin: two directions, each a reader and a writer task."""

    def __init__(
        self,
        proxy: FaultProxy,
        client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    ) -> None:
        self.proxy = proxy
        self.writers = (client[1], upstream[1])
        self.tasks = [
            proxy._spawn(self._direction(client[0], upstream[1], "upstream")),
            proxy._spawn(self._direction(upstream[0], client[1], "downstream")),
        ]

    async def _direction(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, name: str) -> None:
        queue: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue(_QUEUE_CHUNKS)
        forward = self.proxy._spawn(self._forward(queue, writer))
        try:
            while data := await reader.read(_CHUNK):
                await queue.put((time.monotonic() + self.proxy._draw(name), data))
            await queue.put(None)
            await forward
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            forward.cancel()
            self.abort()

    async def _forward(self, queue: asyncio.Queue[tuple[float, bytes] | None], writer: asyncio.StreamWriter) -> None:
        while (item := await queue.get()) is not None:
            due, data = item
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            await self.proxy._flowing.wait()  # paused: hold it
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()

    def abort(self) -> None:
        for w in self.writers:
            try:
                w.transport.abort()
            except Exception:
                pass
        self.proxy._connections.discard(self)


class FaultProxy:
    """A TCP forwarder on ``host:listen_port`` to ``host:target_port`` with injectable faults."""

    def __init__(
        self,
        listen_port: int,
        target_port: int,
        host: str = "127.0.0.1",
        *,
        max_connections: int = 256,
        seed: int | None = None,
    ) -> None:
        _check_loopback(host)
        self.host = host
        self.listen_port = listen_port
        self.target_port = target_port
        self.max_connections = max_connections
        self.connections = 0  # accepted so far
        self.refused = 0
        self._server: asyncio.AbstractServer | None = None
        self._connections: set[_Connection] = set()
        self._handlers: set[asyncio.Task[None]] = set()
        self._tasks: set[asyncio.Task[None]] = set()  # every pipe task, so cut/stop can reap them all
        self._delays: dict[str, Delay] = {"upstream": 0.0, "downstream": 0.0}
        self._rng = random.Random(seed)
        self._flowing = asyncio.Event()
        self._flowing.set()

    # -- lifecycle ---------------------------------------------------------------------------------
    async def start(self) -> None:
        if self._server is None:
            self._server = await asyncio.start_server(self._handle, self.host, self.listen_port, reuse_address=True)
            if self.listen_port == 0:
                self.listen_port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Stop listening and cut every open connection (clients see resets, not a clean close)."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        await self.cut()

    # -- faults ------------------------------------------------------------------------------------
    def delay(self, upstream: Delay = 0.0, downstream: Delay = 0.0) -> None:
        """Delay every chunk client->broker by ``upstream`` and broker->client by ``downstream``."""
        self._delays = {"upstream": _check_delay(upstream), "downstream": _check_delay(downstream)}

    def pause(self) -> None:
        """Hold all traffic (both directions) until :meth:`resume`; connections stay open."""
        self._flowing.clear()

    def resume(self) -> None:
        """Let held traffic flow again (delays stay as set; :meth:`delay` with no args clears them)."""
        self._flowing.set()

    @property
    def paused(self) -> bool:
        return not self._flowing.is_set()

    async def cut(self) -> None:
        """Abort every open connection now; new connections are accepted as before."""
        for conn in list(self._connections):
            conn.abort()
        self._connections.clear()
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    @property
    def open_connections(self) -> int:
        return len(self._connections)

    # -- internals ---------------------------------------------------------------------------------
    def _spawn(self, coro: Any) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _draw(self, direction: str) -> float:
        delay = self._delays[direction]
        return self._rng.uniform(*delay) if isinstance(delay, tuple) else delay

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._connections) >= self.max_connections:
            self.refused += 1
            writer.transport.abort()
            return
        self.connections += 1
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
        try:
            upstream = await asyncio.open_connection(self.host, self.target_port)
        except OSError:
            writer.transport.abort()
            return
        finally:
            if task is not None:
                self._handlers.discard(task)
        self._connections.add(_Connection(self, (reader, writer), upstream))


class ThreadedFaultProxy:
    """A :class:`FaultProxy` on its own event loop in a daemon thread, for synchronous drivers
    (pytest tests that run worker processes, the soak script). Same methods, blocking."""

    def __init__(self, listen_port: int, target_port: int, **kwargs: Any) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="fault-proxy", daemon=True)
        self.thread.start()
        self.proxy: FaultProxy = self._call(self._make(listen_port, target_port, kwargs))

    @staticmethod
    async def _make(listen_port: int, target_port: int, kwargs: dict[str, Any]) -> FaultProxy:
        return FaultProxy(listen_port, target_port, **kwargs)  # its Event belongs to the proxy's loop

    def _call(self, coro: Awaitable[T], timeout: float = 30.0) -> T:
        fut: Future[T] = asyncio.run_coroutine_threadsafe(coro, self.loop)  # type: ignore[arg-type]
        return fut.result(timeout)

    def _do(self, fn: Callable[[], None]) -> None:
        async def run() -> None:
            fn()

        self._call(run())

    @property
    def port(self) -> int:
        return self.proxy.listen_port

    def start(self) -> None:
        self._call(self.proxy.start())

    def stop(self) -> None:
        self._call(self.proxy.stop())

    def cut(self) -> None:
        self._call(self.proxy.cut())

    def pause(self) -> None:
        self._do(self.proxy.pause)

    def resume(self) -> None:
        self._do(self.proxy.resume)

    def delay(self, upstream: Delay = 0.0, downstream: Delay = 0.0) -> None:
        self._do(lambda: self.proxy.delay(upstream, downstream))

    def close(self) -> None:
        """Stop the proxy and its thread (idempotent)."""
        if self.loop.is_closed():
            return
        if self.thread.is_alive():
            try:
                self.stop()
            finally:
                self.loop.call_soon_threadsafe(self.loop.stop)
                self.thread.join(10)
        self.loop.close()


def proxied_broker_command(binary: str, broker_port: int, proxy_port: int) -> list[str]:
    """tansu listening on ``broker_port`` but advertising the proxy, so every client goes through it."""
    return [
        binary,
        "broker",
        "--listener-url",
        f"tcp://127.0.0.1:{broker_port}",
        "--advertised-listener-url",
        f"tcp://127.0.0.1:{proxy_port}",
    ]


@contextlib.contextmanager
def proxied_dev_broker(log_path: Path, *, seed: int | None = None) -> Iterator[tuple[Any, ThreadedFaultProxy]]:
    """A tansu dev broker whose every client connection goes through a :class:`ThreadedFaultProxy`.

    Yields ``(broker, proxy)``; ``broker.url``/``broker.bootstrap`` name the broker's own port for
    the first contact, after which clients follow the advertised (proxy) address.
    """
    from agentstream import devbroker

    broker_port, proxy_port = devbroker.free_port(), devbroker.free_port()
    proxy = ThreadedFaultProxy(proxy_port, broker_port, seed=seed)
    try:
        proxy.start()
        command = proxied_broker_command(devbroker.tansu_binary(), broker_port, proxy_port)
        with mock.patch.object(devbroker, "_broker_command", lambda port, silent=False: command):
            broker = devbroker.DevBroker(broker_port, log_path=log_path)
            broker.start()
        try:
            yield broker, proxy
        finally:
            broker.stop()
    finally:
        proxy.close()
