"""Faust's three web addresses: ``web_bind`` (where the server listens), ``web_host`` (the name
others reach it by) and ``canonical_url`` (the URL advertised in the group, from which other
workers take the host:port they forward table lookups to)."""

from __future__ import annotations

import json
import socket
import uuid
from typing import Any

import aiohttp
import pytest

import agentstream
from agentstream.exceptions import ConfigError
from agentstream.testing import AppHarness


def make_app(**settings: Any) -> agentstream.App:
    app = agentstream.App(f"bind-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=2, **settings)
    counts = app.Table("counts", default=int)

    @app.agent(app.topic("words"))
    async def count(stream: Any) -> None:
        async for word in stream:
            counts[word] += 1

    return app


async def get_json(url: str) -> Any:
    async with aiohttp.ClientSession() as s, s.get(url) as r:
        assert r.status == 200, await r.text()
        return await r.json()


def advertised(h: AppHarness) -> str:
    """What this worker tells the group (its member user data) and what the group hands back."""
    host = json.loads(h.worker.assignor.member_user_data())["host"]
    assert set(h.worker.assignment.owners.values()) == {host}  # the leader's plan names it as the owner
    return str(host)


async def test_by_default_it_listens_on_loopback_and_advertises_that() -> None:
    async with AppHarness(make_app()) as h:
        assert h.web.host == "127.0.0.1"
        assert advertised(h) == f"127.0.0.1:{h.web.port}"


async def test_web_host_is_advertised_while_the_server_listens_on_web_bind() -> None:
    async with AppHarness(make_app(), web_bind="127.0.0.1", web_host="worker-7.example.com") as h:
        port = h.web.port
        assert advertised(h) == f"worker-7.example.com:{port}"
        body = await get_json(f"http://127.0.0.1:{port}/metadata")  # reachable where it listens
        assert body["worker"] == f"worker-7.example.com:{port}"
        assert set(body["partitions"].values()) == {f"worker-7.example.com:{port}"}
        assert h.web.url == f"http://worker-7.example.com:{port}"


async def test_canonical_url_is_what_the_group_learns() -> None:
    async with AppHarness(make_app(), canonical_url="http://node-a.example:8080") as h:
        assert advertised(h) == "node-a.example:8080"
        assert h.web.url == "http://node-a.example:8080"
        body = await get_json(f"http://127.0.0.1:{h.web.port}/metadata")  # still listening on its own port
        assert body["worker"] == "node-a.example:8080"


async def test_canonical_url_without_a_port_takes_the_schemes_port() -> None:
    async with AppHarness(make_app(), canonical_url="https://node-b.example") as h:
        assert advertised(h) == "node-b.example:443"
        assert h.web.scheme == "https"  # forwards and redirects to peers use the advertised scheme


async def test_a_wildcard_bind_listens_everywhere_and_advertises_the_host_name() -> None:
    async with AppHarness(make_app(), web_bind="0.0.0.0") as h:
        assert h.web.host == "0.0.0.0"
        assert advertised(h) == f"{socket.gethostname()}:{h.web.port}"
        assert (await get_json(f"http://127.0.0.1:{h.web.port}/livez"))["status"] == "alive"


async def test_web_host_alone_is_also_where_it_listens() -> None:
    """Given only web_host, the server listens exactly where others are told to connect (no wider)."""
    async with AppHarness(make_app(), web_host="127.0.0.1") as h:
        assert (h.web.host, advertised(h)) == ("127.0.0.1", f"127.0.0.1:{h.web.port}")


async def test_an_address_this_machine_does_not_have_is_reported_as_web_bind() -> None:
    app = make_app(web_bind="192.0.2.1")  # TEST-NET-1: no local interface has it
    with pytest.raises(ConfigError) as info:
        async with AppHarness(app):
            pass
    assert info.value.setting == "web_bind"


@pytest.mark.parametrize(
    "url",
    ["ftp://h:1", "http://h:1/prefix", "http://user@h:1", "http://h:1?x=1", "http://h:0", "h:6066", "http://h:99999"],
)
def test_a_canonical_url_workers_cannot_route_to_is_refused(url: str) -> None:
    with pytest.raises(ConfigError) as info:
        agentstream.App("c", broker="memory://", canonical_url=url)
    assert info.value.setting == "canonical_url"


def test_canonical_url_may_be_a_yarl_url_as_in_faust() -> None:
    from yarl import URL

    app = agentstream.App("c", broker="memory://", canonical_url=URL("http://w1:7000"))
    assert app.conf.canonical_url == "http://w1:7000"


@pytest.mark.parametrize(("setting", "value"), [("web_transport", "udp://127.0.0.1:1"), ("web_in_thread", True)])
def test_web_settings_it_cannot_honour_are_refused_naming_them(setting: str, value: Any) -> None:
    with pytest.raises(ConfigError) as info:
        agentstream.App("c", broker="memory://", **{setting: value})
    assert info.value.setting == setting


def test_the_default_web_transport_is_accepted() -> None:
    assert agentstream.App("c", broker="memory://", web_transport="tcp://").conf.web_transport == "tcp://"


def test_faust_worker_and_cli_flags_set_bind_and_host_separately(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentstream.cli import main
    from agentstream.faust.worker import Worker as FaustWorker
    from agentstream.worker.worker import Worker

    seen: list[Any] = []

    async def run(self: Worker) -> int:
        seen.append(self.settings)
        return 0

    monkeypatch.setattr(Worker, "run", run)
    monkeypatch.setattr("gc.freeze", lambda: None)
    app = make_app()
    worker = FaustWorker(app, web_bind="0.0.0.0", web_host="w1.example", install_signal_handlers=False)
    assert (worker.settings.web_bind, worker.settings.web_host) == ("0.0.0.0", "w1.example")
    app = make_app()
    assert main(["worker", "--web-bind", "0.0.0.0", "--web-host", "w2.example", "--without-web"], app=app) == 0
    assert (seen[-1].web_bind, seen[-1].web_host) == ("0.0.0.0", "w2.example")
