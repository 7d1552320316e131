"""The ``agentstream`` command: ``agentstream -A MODULE worker|send|agents|topics|tables`` and
``agentstream dev-broker``. Settings precedence: App arguments < AGENTSTREAM_* env < CLI flags."""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import orjson

from .commands import argument, option  # Faust's ``faust.cli.option``/``argument`` for @app.command
from .exceptions import AgentStreamError, ConfigError

if TYPE_CHECKING:
    from .app import App

__all__ = ["main", "load_app", "option", "argument"]

LOG_FORMAT = "[%(asctime)s] [%(process)d] [%(levelname)s] %(name)s: %(message)s"


def load_app(spec: str) -> "App":
    """``package.module`` or ``package.module:attribute``; the module's ``app`` by default."""
    from .app import App

    module_name, _, attr = spec.partition(":")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError("app", f"cannot import {module_name!r}: {exc}", "pass -A package.module[:app] importable from the current directory") from exc
    if attr:
        obj = getattr(module, attr, None)
    else:
        obj = getattr(module, "app", None)
        if not isinstance(obj, App):
            obj = next((v for v in vars(module).values() if isinstance(v, App)), None)
    if not isinstance(obj, App):
        raise ConfigError("app", f"{spec!r} has no agentstream.App", "pass -A module:attribute naming the App instance")
    return obj


def setup_logging(level: str, logfile: str | None = None) -> None:
    handler: logging.Handler = logging.FileHandler(logfile) if logfile else logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    try:
        root.setLevel(level.upper())
    except ValueError:
        raise ConfigError("loglevel", f"unknown level {level!r}", "use debug, info, warning or error") from None
    logging.getLogger("aiokafka").setLevel(max(root.level, logging.WARNING))


def _run(coro: Any) -> Any:
    try:
        import uvloop

        return uvloop.run(coro)
    except ImportError:  # pragma: no cover - uvloop is a dependency; keep the CLI usable without it
        return asyncio.run(coro)


def _parser(app: "App | None" = None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="agentstream", description="Faust-style stream processing on Kafka")
    p.add_argument("-A", "--app", help="the app module, e.g. apps.wordcount or apps.wordcount:app")
    p.add_argument("-l", "--loglevel", default=None, help="log level (default: the app's, INFO)")
    sub = p.add_subparsers(dest="command", required=True)

    w = sub.add_parser("worker", help="run a worker: join the group and process the assigned partitions")
    w.add_argument("--broker", "-b", help="broker URL, e.g. kafka://127.0.0.1:9092 or memory://")
    w.add_argument("--web-port", type=int, help="port of the worker's web server")
    w.add_argument("--web-host", "--web-bind", dest="web_host", help="address the web server binds (default 127.0.0.1)")
    w.add_argument("--without-web", action="store_true", help="do not start the web server")
    w.add_argument("--data-dir", help="where table stores and checkpoints live")
    w.add_argument("-l", "--loglevel", dest="worker_loglevel", default=None, help="log level")
    w.add_argument("-f", "--logfile", help="log to this file instead of stderr")

    s = sub.add_parser("send", help="send one record to a topic (or agent)")
    s.add_argument("topic")
    s.add_argument("value", nargs="?", default=None)
    s.add_argument("--key", "-k", default=None)
    s.add_argument("--partition", type=int, default=None)
    s.add_argument("--repeat", "-r", type=int, default=1)
    s.add_argument("--broker", "-b")

    sub.add_parser("agents", help="list agents and the topology")
    sub.add_parser("topics", help="list the topics the app uses")
    sub.add_parser("tables", help="list the tables: kind, store, partitions, changelog topic, windowing")

    e = sub.add_parser("export", help="export a table (its changelog) with Spark: needs agentstream[spark] and Java 17")
    e.add_argument("table", help="the table's name, as given to app.Table()")
    e.add_argument("--out", "-o", required=True, help="output directory (replaced)")
    e.add_argument("--format", dest="export_format", choices=("parquet", "csv", "json"), default="parquet")
    e.add_argument("--master", default=None, help="Spark master URL (default local[*])")
    e.add_argument("--all-versions", action="store_true", help="every changelog record, not the latest value per key")
    e.add_argument("--broker", "-b", help="broker URL (default: the app's)")

    d = sub.add_parser("dev-broker", help="run the local Kafka-protocol dev broker (memory only)")
    d.add_argument("--port", type=int, default=9092)

    sub.add_parser("models", help="list the app's Record models (Faust's `models`)")
    m = sub.add_parser("model", help="show a model's fields, types and defaults")
    m.add_argument("name", help="the model's class name or namespace")
    r = sub.add_parser("reset", help="delete the app's local table stores (restored from the changelogs on start); "
                                     "--offsets also rewinds the consumer group")
    r.add_argument("--data-dir", help="where table stores live (default: the app's)")
    r.add_argument("--offsets", action="store_true", help="also reset the group's offsets to the earliest")
    r.add_argument("--yes", "-y", action="store_true", help="do it (without: print what would be done)")
    r.add_argument("--broker", "-b")
    if app is not None and app.commands:
        from .commands import add_parsers

        add_parsers(sub, app, set(sub.choices))
    return p


def _preload(argv: Sequence[str] | None) -> "App | None":
    """Import the -A app before parsing, so its @app.command commands are known to the parser."""
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)  # "--a 1" is not "--app"
    pre.add_argument("-A", "--app")
    known, _ = pre.parse_known_args(argv)
    if not known.app:
        return None
    try:
        return load_app(known.app)
    except AgentStreamError:
        return None  # reported by main() with the usual message


def main(argv: Sequence[str] | None = None, app: "App | None" = None) -> int:
    args = _parser(app or _preload(argv)).parse_args(argv)
    level = getattr(args, "worker_loglevel", None) or args.loglevel
    try:
        if args.command == "dev-broker":
            from .devbroker import run_foreground

            setup_logging(level or "INFO")
            return run_foreground(args.port)
        if app is None:
            if not args.app:
                raise ConfigError("app", "no app given", "pass -A package.module (e.g. -A apps.wordcount)")
            app = load_app(args.app)
        setup_logging(level or app.settings.loglevel, getattr(args, "logfile", None))
        from .faust_compat import flush_deferred_logs

        flush_deferred_logs()
        handler: Callable[[Any, App], int] | None = _COMMANDS.get(args.command)
        if handler is None:  # an @app.command
            from .commands import run_command

            return run_command(app, args.command, args)
        return handler(args, app)
    except AgentStreamError as exc:
        print(f"agentstream: error: {exc}", file=sys.stderr)
        return 2


def _worker(args: argparse.Namespace, app: "App") -> int:
    from .worker.worker import Worker

    changes: dict[str, Any] = {}
    if args.broker:
        changes["broker"] = args.broker
    if args.web_port is not None:
        changes["web_port"] = args.web_port
    if args.web_host:
        changes["web_host"] = args.web_host
    if args.without_web:
        changes["web_enabled"] = False
    if args.data_dir:
        changes["data_dir"] = Path(args.data_dir)
    if changes:
        app.settings = app.settings.replace(**changes)

    async def _go() -> int:
        return await Worker(app, install_signal_handlers=True).run()

    # A worker allocates a few short-lived objects per record: move what start-up created out
    # of the collector's way and collect the young generation less often.
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)

    return int(_run(_go()))


def _parse_value(raw: str | None) -> Any:
    if raw is None:
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw


def _send(args: argparse.Namespace, app: "App") -> int:
    if args.broker:
        app.settings = app.settings.replace(broker=args.broker)
    topic = app.topics.get(args.topic) or next((a.channel for a in app.agents if a.name == args.topic), None)
    if topic is None:
        topic = app.topic(args.topic)

    async def _go() -> int:
        try:
            for _ in range(args.repeat):
                fut = await topic.send(key=args.key, value=_parse_value(args.value), partition=args.partition)
                md = await fut
                print(orjson.dumps({"topic": md.topic, "partition": md.partition, "offset": md.offset}).decode())
        finally:
            await app.stop_clients()
        return 0

    return int(_run(_go()))


def _agents(args: argparse.Namespace, app: "App") -> int:
    async def _go() -> None:
        await app.discover()

    _run(_go())
    for agent in app.agents:
        print(f"{agent.name}: topics={','.join(t.name for t in agent.topics)} concurrency={agent.concurrency} "
              f"splits={','.join(s.name for s in agent.splits) or '-'}")
    print(app.topology().describe())
    return 0


def _topics(args: argparse.Namespace, app: "App") -> int:
    async def _go() -> None:
        await app.discover()

    _run(_go())
    changelogs = {t.changelog_topic.name for t in app.tables.values()}
    for name, topic in sorted(app.topics.items()):
        if name in changelogs:
            continue
        kind = "internal" if topic.internal else "topic"
        print(f"{name}\tpartitions={topic.partitions}\t{kind}")
    for table in app.tables.values():
        print(f"{table.changelog_topic.name}\tpartitions={table.changelog_topic.partitions}\tchangelog")
    return 0


def _tables(args: argparse.Namespace, app: "App") -> int:
    """One line per table, tab-separated like ``topics``."""
    if not app.tables:
        print("(no tables)")
    for name, table in sorted(app.tables.items()):
        state = table._windowed
        if state is None:
            windowing = "-"
        else:
            w = state.window
            kind = "tumbling" if w.step == w.size else f"hopping step={w.step:g}s"
            windowing = f"{kind} size={w.size:g}s expires={w.expires:g}s grace={state.grace:g}s"
        print(f"{name}\tkind={type(table).__name__}\tstore={table.store_url or app.settings.store}\t"
              f"partitions={table.partitions}\tchangelog={table.changelog_topic.name}\twindow={windowing}")
    return 0


def _export(args: argparse.Namespace, app: "App") -> int:
    from .exporter.spark import cli_export

    return cli_export(app, args.table, args.out, fmt=args.export_format, master=args.master,
                      all_versions=args.all_versions, broker=args.broker)


def _models(args: argparse.Namespace, app: "App") -> int:
    from .commands import print_models

    return print_models(app)


def _model(args: argparse.Namespace, app: "App") -> int:
    from .commands import print_model

    return print_model(app, args.name)


def _reset(args: argparse.Namespace, app: "App") -> int:
    from .commands import reset_app

    changes: dict[str, Any] = {}
    if args.data_dir:
        changes["data_dir"] = Path(args.data_dir)
    if args.broker:
        changes["broker"] = args.broker
    if changes:
        app.settings = app.settings.replace(**changes)
    return reset_app(app, offsets=args.offsets, yes=args.yes)


_COMMANDS: dict[str, Callable[[argparse.Namespace, "App"], int]] = {
    "models": _models,
    "model": _model,
    "reset": _reset,
    "worker": _worker,
    "send": _send,
    "agents": _agents,
    "topics": _topics,
    "export": _export,
    "tables": _tables,
}
