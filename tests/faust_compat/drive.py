"""Drives one running worker of ``worker_app`` (either framework) through the worker scenarios and
returns what each observed: the lines the app printed, the JSON its pages answered."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

WAIT = 8.0  # seconds a scenario waits for its output before it is reported missing


def http(url: str) -> Any:
    """``[status, json body]`` of a GET."""
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return [resp.status, json.loads(resp.read() or b"null")]
    except urllib.error.HTTPError as exc:
        body = exc.read()
        try:
            return [exc.code, json.loads(body)]
        except ValueError:
            return [exc.code, body.decode(errors="replace")[:200]]
    except (OSError, ValueError) as exc:
        return ["unreachable", type(exc).__name__]


def http_method(url: str, method: str, header: str | None = None) -> Any:
    """``[status, body]`` of a request with ``method``: JSON when it parses, else its text (HEAD: "");
    with ``header``, that response header's value too."""
    req = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            status, body, headers = resp.status, resp.read(), resp.headers
    except urllib.error.HTTPError as exc:
        status, body, headers = exc.code, exc.read(), exc.headers
    except (OSError, ValueError) as exc:
        return ["unreachable", type(exc).__name__]
    try:
        got: list[Any] = [status, json.loads(body)]
    except ValueError:
        got = [status, body.decode(errors="replace")[:200]]
    return got + [headers.get(header)] if header else got


def create_topics(bootstrap: str, names: list[str], partitions: int = 4) -> None:
    """The apps' source topics, made before the workers start (Faust does not create them)."""

    async def create() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(n, partitions, 1) for n in names])
        finally:
            await admin.close()

    asyncio.run(create())


class Driver:
    def __init__(
        self,
        bootstrap: str,
        prefix: str,
        web_url: str,
        log: Callable[[], str],
        cli: list[str],
        cli_env: dict[str, str] | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.prefix = prefix
        self.web = web_url
        self.log = log
        self.cli = cli  # argv prefix of the framework's command line, up to and including ``-A module``
        self.cli_env = cli_env
        self.seconds: dict[str, float] = {}  # each scenario's run time

    def topic(self, name: str) -> str:
        return f"compat-{self.prefix}-{name}"

    def outputs(self, name: str) -> list[Any]:
        return [json.loads(m.group(1)) for m in re.finditer(rf"COMPAT-OUT {name} (.*)", self.log())]

    def wait_output(self, name: str, timeout: float = WAIT, poke: Callable[[], None] | None = None) -> list[Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.outputs(name)
            if got:
                return got
            if poke is not None:
                poke()
            time.sleep(0.25)
        return self.outputs(name)

    def wait_http(self, path: str, want: Any, timeout: float = WAIT) -> Any:
        deadline = time.monotonic() + timeout
        got = http(self.web + path)
        while got != want and time.monotonic() < deadline:
            time.sleep(0.25)
            got = http(self.web + path)
        return got

    def produce(self, topic: str, records: list[tuple[str | None, Any, int | None]]) -> None:
        """``(key, value, partition)`` records: values JSON-encoded, ``bytes`` sent as they are."""

        async def send() -> None:
            producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks=1)
            await producer.start()
            try:
                for key, value, partition in records:
                    await producer.send(
                        self.topic(topic),
                        value if isinstance(value, bytes) else json.dumps(value).encode(),
                        key=None if key is None else key.encode(),
                        partition=partition,
                    )
                await producer.flush()
            finally:
                await producer.stop()

        asyncio.run(send())

    # -- the scenarios (each returns what the comparison sees) ------------------------------------
    def concurrency(self) -> Any:
        self.produce("concurrency", [(f"k{i}", i, i % 4) for i in range(16)])
        return self.wait_output("concurrency")

    def preamble(self) -> Any:
        self.produce("preamble", [(f"k{i}", i, i % 4) for i in range(8)])
        return self.wait_output("preamble")

    def table_views(self) -> Any:
        self.produce("words", [(w, w, None) for w in ("a", "b", "a")])
        self.wait_http("/table/compat_counts/a/", [200, 2])
        paths = [
            "/table/",
            "/table/compat_counts/",
            "/table/compat_counts/a/",
            "/table/compat_counts/zzz/",
            "/table/nope/",
        ]
        return {p: http(self.web + p) for p in paths}

    def table_route(self) -> Any:
        # table_views counts the words this page reads
        return self.wait_http("/count/a/", [200, {"a": 2}], timeout=WAIT + 2)

    def window_close(self) -> Any:
        """One "w" click, then ticks while the stream keeps running; Faust's cleanup closes the
        expired window of "w" (printed once, with its count)."""
        # one partition: Faust skips a window starting no later than the last window it closed on
        # any partition (its last_closed_window is per table), so ticks elsewhere could hide it
        self.produce("clicks", [("w", "x", 0)])
        return self.wait_output("window_close", poke=lambda: self.produce("clicks", [("t", "tick", 0)]))[:1]

    def set_table_manager(self) -> Any:
        ops = [
            {"op": "add", "key": "k", "args": ["a"]},
            {"op": "add", "key": "k", "args": ["b"]},
            {"op": "add", "key": "k", "args": ["c"]},
            {"op": "discard", "key": "k", "args": ["b"]},
            {"op": "difference_update", "key": "k", "args": [["c"]]},
            {"op": "symmetric_difference_update", "key": "k", "args": [["x", "a"]]},
            {"op": "intersection_update", "key": "k", "args": [["x", "y"]]},
            {"op": "add", "key": "j", "args": ["z"]},
            {"op": "clear", "key": "j"},
        ]
        self.produce("set-ops", [(op["key"], op, None) for op in ops])  # keyed: one partition, in order
        return {
            "k": self.wait_http("/set/k/", [200, ["x"]]),
            "j": self.wait_http("/set/j/", [200, []], timeout=2.0),
            "errors": self.outputs("set_table"),
        }

    def cli_send_agent(self) -> Any:
        try:
            done = subprocess.run(
                [*self.cli, "send", "@echo", json.dumps("via-cli")],
                capture_output=True,
                text=True,
                timeout=WAIT + 4,  # Faust's takes about 2 s
                env=self.cli_env,
            )
        except subprocess.TimeoutExpired:
            return {"exit": "timed out", "echoed": [v for v in self.outputs("echo") if v != "ping"]}
        deadline = time.monotonic() + WAIT
        while "via-cli" not in self.outputs("echo") and time.monotonic() < deadline:
            time.sleep(0.25)
        if done.returncode != 0:
            print(f"{self.cli} send @echo: {done.stdout[-1500:]}{done.stderr[-1500:]}")
        return {"exit": done.returncode, "echoed": [v for v in self.outputs("echo") if v != "ping"]}

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Until the echo agent has handled a record: partitions assigned, agents running."""
        deadline = time.monotonic() + timeout
        while "ping" not in self.outputs("echo"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the {self.prefix} worker handled no record within {timeout}s")
            self.produce("echo", [(None, "ping", None)])
            time.sleep(0.5)

    def decode_error_hook(self) -> Any:
        """A value that does not decode, then one that does, on one partition (in order)."""
        self.produce("points", [("p", b"not json", 0), ("p", {"x": 7}, 0)])
        self.wait_output("point")
        return {"hook": self.outputs("decode_error_hook"), "points": self.outputs("point")}

    def is_leader(self) -> Any:
        return self.wait_output("is_leader", poke=None)[-1:]

    def web_views(self) -> Any:
        """Raised web errors, HEAD/OPTIONS, the response helpers' keywords and a cached view."""
        got = {
            "GET missing": http_method(self.web + "/views/missing/", "GET"),
            "POST missing": http_method(self.web + "/views/missing/", "POST"),
            "HEAD json": http_method(self.web + "/views/helpers/json/", "HEAD"),
            "OPTIONS json": http_method(self.web + "/views/helpers/json/", "OPTIONS"),
        }
        for kind in ("json", "text", "error", "notfound"):
            got[kind] = http_method(self.web + f"/views/helpers/{kind}/", "GET", "X-Compat" if kind == "json" else None)
        got["text content type"] = http_method(self.web + "/views/helpers/text/", "GET", "Content-Type")[2]
        got["cached"] = [http_method(self.web + "/views/cached/counted/", "GET") for _ in range(3)]
        return got

    SCENARIOS = (
        "concurrency",
        "preamble",
        "table_views",
        "table_route",
        "window_close",
        "set_table_manager",
        "cli_send_agent",
        "is_leader",
        "decode_error_hook",
        "web_views",
    )

    def run_all(self) -> dict[str, Any]:
        """Every scenario at once (each has its own topics and pages), so a missing output costs
        one wait, not one per scenario."""
        results: dict[str, Any] = {}

        def run(name: str) -> None:
            t0 = time.perf_counter()
            try:
                results[name] = getattr(self, name)()
            except Exception as exc:  # a scenario's failure is its result
                results[name] = f"error {type(exc).__name__}: {exc}"
            self.seconds[name] = round(time.perf_counter() - t0, 2)

        threads = [threading.Thread(target=run, args=(name,)) for name in self.SCENARIOS]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return results
