"""The public API of ``agentstream``: ``__all__`` is a deliberate list, each name is the class it
should be, Faust's spellings come from the compat package (not ``__all__``), one class per public
name, and the package ships ``py.typed``."""

from __future__ import annotations

import importlib
import os
import pkgutil
import subprocess
import sys
import types
from pathlib import Path

import agentstream
import agentstream.faust

ROOT = Path(__file__).resolve().parents[2]

# name -> where the object lives ("module:attribute"; a class is defined there): changing the public
# API changes this table.
EXPORTED = {
    "App": "agentstream.app:App",
    "Agent": "agentstream.agents.agent:Agent",
    "Topic": "agentstream.topics:Topic",
    "TopicGroup": "agentstream.topics:TopicGroup",
    "Channel": "agentstream.channels:Channel",
    "Record": "agentstream.models.record:Record",
    "Stream": "agentstream.streams:Stream",
    "Event": "agentstream.events:Event",
    "current_event": "agentstream.events:current_event",
    "Table": "agentstream.tables.table:Table",
    "GlobalTable": "agentstream.tables.kinds:GlobalTable",
    "SetTable": "agentstream.tables.kinds:SetTable",
    "SetGlobalTable": "agentstream.tables.kinds:SetGlobalTable",
    "TumblingWindow": "agentstream.tables.windows:TumblingWindow",
    "HoppingWindow": "agentstream.tables.windows:HoppingWindow",
    "SlidingWindow": "agentstream.tables.windows:SlidingWindow",
    "WindowFinal": "agentstream.tables.final_results:WindowFinal",
    "Service": "agentstream.service:Service",
    "Worker": "agentstream.faust.worker:Worker",
    "Sensor": "agentstream.sensors:Sensor",
    "Monitor": "agentstream.sensors:Monitor",
    "Signal": "agentstream.signals:Signal",
    "SyncSignal": "agentstream.signals:SyncSignal",
    "SSLCredentials": "agentstream.credentials:SSLCredentials",
    "SASLCredentials": "agentstream.credentials:SASLCredentials",
    "GSSAPICredentials": "agentstream.credentials:GSSAPICredentials",
    "OAuthCredentials": "agentstream.credentials:OAuthCredentials",
    "AgentStreamError": "agentstream.exceptions:AgentStreamError",
    "ConfigError": "agentstream.exceptions:ConfigError",
    "ImproperlyConfigured": "agentstream.exceptions:ImproperlyConfigured",
    "PartitionCountMismatch": "agentstream.exceptions:PartitionCountMismatch",
    "SerializationError": "agentstream.exceptions:SerializationError",
    "TopologyError": "agentstream.exceptions:TopologyError",
    "ValidationError": "agentstream.exceptions:ValidationError",
}
# Faust's spellings: answered by ``agentstream`` (``import agentstream as faust``), not exported.
FAUST_ONLY = {
    "Model": "Record",
    "EventT": "Event",
    "StreamT": "Stream",
    "TopicT": "Topic",
    "ChannelT": "Channel",
    "AgentT": "Agent",
    "TableT": "Table",
    "ServiceT": "Service",
}


def _is_at(obj: object, where: str) -> bool:
    module, _, attr = where.partition(":")
    if getattr(importlib.import_module(module), attr) is not obj:
        return False
    return not isinstance(obj, type) or (obj.__module__, obj.__qualname__) == (module, attr)


def test_all_is_the_curated_list_and_each_name_is_what_it_should_be() -> None:
    exported = [n for n in agentstream.__all__ if n != "__version__"]
    assert len(exported) == len(set(exported)), "a name is exported twice"
    assert sorted(exported) == sorted(EXPORTED)
    assert [n for n in exported if not _is_at(getattr(agentstream, n), EXPORTED[n])] == []
    assert "__version__" in agentstream.__all__ and isinstance(agentstream.__version__, str)


def test_every_public_member_is_in_all() -> None:
    """As httpx's tests/test_exported_members.py: nothing public slips in beside ``__all__``
    (submodules, which Python sets as attributes when they are imported, are not members)."""
    public = {n for n, v in vars(agentstream).items() if not n.startswith("_") and not isinstance(v, types.ModuleType)}
    lazy = {"Worker"}  # the runtime: imported on first use (tests/unit/test_import_cost.py)
    assert public | lazy == set(agentstream.__all__) - {"__version__"}


def test_faust_spellings_come_from_the_compat_package() -> None:
    faust_own = {"uuid", "ModelOptions", "Codec", "Schema", "Settings", "Window"}  # compat classes, not aliases
    assert set(FAUST_ONLY) | faust_own == set(agentstream.faust.__all__) - set(agentstream.__all__)
    assert all(getattr(agentstream, name) is getattr(agentstream.faust, name) for name in faust_own)
    for alias, name in FAUST_ONLY.items():
        assert alias not in agentstream.__all__
        assert getattr(agentstream, alias) is getattr(agentstream.faust, alias) is getattr(agentstream, name), alias
    assert agentstream.uuid is agentstream.faust.uuid and len(agentstream.uuid()) == 36
    namespace: dict[str, object] = {}
    exec("from agentstream import StreamT, ChannelT, Model", namespace)
    assert namespace["StreamT"] is agentstream.Stream and namespace["Model"] is agentstream.Record
    # ``import agentstream.faust as faust`` has every name ``import agentstream as faust`` has
    # (the exceptions as in Faust: listed by ``faust.exceptions``, answered by ``faust`` too)
    for name in set(agentstream.__all__) - {"__version__"}:
        assert getattr(agentstream.faust, name) is getattr(agentstream, name), name
        assert name in agentstream.faust.__all__ or name in agentstream.faust.exceptions.__all__, name
    assert agentstream.serializers is agentstream.faust.serializers


def _classes_by_name() -> dict[str, list[type]]:
    """Public classes defined in agentstream's modules, by name (the exporter needs Spark: skipped)."""
    found: dict[str, list[type]] = {}
    for info in pkgutil.walk_packages(agentstream.__path__, "agentstream."):
        if info.name.startswith("agentstream.exporter") or info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if isinstance(obj, type) and obj.__module__ == module.__name__ and not name.startswith("_"):
                found.setdefault(name, []).append(obj)
    return found


def test_one_class_behind_each_public_name() -> None:
    """Two public classes with one name are one class and its subclass: the Worker users meet *is*
    the runtime worker (with Faust's start-up added). Faust's ``serializers.codecs.Codec`` implements
    the one codec interface of :mod:`agentstream.codecs` structurally: that interface is a Protocol
    in a compiled module, which an interpreted class cannot name as its base."""
    from agentstream.codecs import Codec
    from agentstream.faust.serializers import codecs as faust_codecs
    from agentstream.worker.worker import Worker as RuntimeWorker

    found = _classes_by_name()
    for name in EXPORTED:
        classes = found.get(name, [])
        root = min(classes, key=lambda c: len(c.__mro__), default=None)
        assert all(issubclass(c, root) for c in classes), f"unrelated public classes named {name}: {classes}"  # type: ignore[arg-type]
    assert sorted(found["Worker"], key=lambda c: c.__module__) == [agentstream.Worker, RuntimeWorker]
    assert issubclass(agentstream.Worker, RuntimeWorker)
    codec: Codec = faust_codecs.Codec()  # mypy checks it has the interface's dumps and loads
    assert callable(codec.dumps) and callable(codec.loads)
    assert found["Record"] == [agentstream.Record]


def test_the_package_ships_py_typed(tmp_path: Path) -> None:
    assert (ROOT / "agentstream" / "py.typed").is_file()
    done = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_py", "-d", str(tmp_path)],
        cwd=ROOT,
        # a pure build: the compiled one would have mypyc translate the hot path first (a minute of
        # CPU) for a step that only copies the package's files
        env={**os.environ, "AGENTSTREAM_COMPILE": "0"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "agentstream" / "py.typed").is_file()


# faust-streaming 0.15's integrations: each module's names (agentstream adds instrument_asgi_app to asgi)
FAUST_CONTRIB = {
    "agentstream.faust.contrib.asgi": {
        "LoopMismatch", "AsgiService", "FaustLifespanMiddleware", "bind_to_running_loop", "faust_app_running",
        "faust_lifespan", "serve_asgi", "instrument_asgi_app",
    },
    "agentstream.faust.contrib.sentry": {"handler_from_dsn", "setup"},
    "agentstream.faust.web.drivers": {"DRIVERS", "by_name", "by_url"},
}  # fmt: skip


def test_faust_contrib_modules_export_faust_s_names() -> None:
    for module, names in FAUST_CONTRIB.items():
        assert set(importlib.import_module(module).__all__) == names, module
    asgi = importlib.import_module("agentstream.faust.contrib.asgi")
    fastapi = importlib.import_module("agentstream.faust.contrib.fastapi")  # Faust's older name, the same objects
    assert set(fastapi.__all__) == set(asgi.__all__)
    assert all(getattr(fastapi, name) is getattr(asgi, name) for name in asgi.__all__)
