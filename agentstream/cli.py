"""The ``agentstream`` command (click, as Faust's): ``agentstream -A MODULE worker|send|agents|topics|
tables|models|model|export|reset|dead-letters`` and ``agentstream dev-broker``, plus the app's ``@app.command``s.

Settings precedence: App arguments < AGENTSTREAM_* env < CLI flags. The worker's flags are generated
from the :class:`~agentstream.settings.Settings` fields, so a new setting gets its flag for free.
Shell completion is click's: ``eval "$(_AGENTSTREAM_COMPLETE=bash_source agentstream)"``.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import importlib
import logging
import os
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import orjson

from . import faust_args
from ._version import __version__
from .app_loader import load_app  # re-exported: exporter and tests load apps by the -A spec too
from .bulk_gc import worker_gc
from .commands import (  # Faust's ``faust.cli.option``/``argument`` (click's) for @app.command
    argument,
    option,
    print_rows,
    registered,
    then_stop_clients,
)
from .exceptions import AgentStreamError, ConfigError
from .logging_setup import RebalanceNoise as RebalanceNoise  # re-exported (tests, older imports)
from .logging_setup import setup_logging as _setup_logging
from .settings_help import FLAG_ALIASES, setting_fields, setting_help

if TYPE_CHECKING:
    from .app import App

__all__ = ["main", "load_app", "option", "argument", "cli", "setup_logging", "parse_value"]


# -- logging (agentstream.logging_setup) ------------------------------------------------------------------------------
def setup_logging(level: str, logfile: str | None = None, app: App | None = None, *, worker: bool = False) -> None:
    """Logging for a command: ``level`` and ``logfile``, the app's ``log_format``, and for a worker
    the app's ``logging_config`` and ``loghandlers`` too (Faust applies those at worker start)."""
    s = app.settings if app is not None else None
    _setup_logging(
        level,
        logfile,
        log_format=s.log_format if s is not None else "text",
        logging_config=s.logging_config if s is not None and worker else None,
        loghandlers=s.loghandlers if s is not None and worker else None,
    )


LOOPS = ("aio", "uvloop", "eventlet", "gevent")  # Faust's -L/--loop choices


def _run(coro: Any) -> Any:
    """Run ``coro`` on the event loop -L chose (Faust's ``aio``: asyncio's; default: uvloop)."""
    ctx = click.get_current_context(silent=True)
    loop = _state(ctx).loop if ctx is not None else None
    if loop == "aio":
        return asyncio.run(coro)
    try:
        import uvloop

        return uvloop.run(coro)
    except ImportError:  # pragma: no cover - uvloop is a dependency; keep the CLI usable without it
        return asyncio.run(coro)


# -- the command group ------------------------------------------------------------------------------------------------
class State:
    """What the group passes down: the -A spec (loaded on first use), the log level."""

    def __init__(self, app: App | None = None) -> None:
        self._app = app
        self.spec: str | None = None
        self.loglevel: str | None = None
        # Faust's options before the sub-command (faust -A app --datadir=... worker)
        self.datadir: Path | None = None
        self.debug: bool | None = None
        self.json = False
        self.quiet = False
        self.workdir: str | None = None
        self.loop: str | None = None
        self.logfile: str | None = None
        self._configured = False
        self.discovered = False  # the app's autodiscover modules imported (for their @app.command)

    def app(self) -> App:
        if self._app is None:
            if not self.spec:
                raise ConfigError("app", "no app given", "pass -A package.module (e.g. -A apps.wordcount)")
            self._app = load_app(self.spec)
        if not self._configured:  # --datadir/-D and --debug apply to every command's app
            self._configured = True
            changes: dict[str, Any] = {}
            if self.datadir is not None:
                changes["data_dir"] = self.datadir
            if self.debug is not None:
                changes["debug"] = self.debug
            if changes:
                self._app.settings = self._app.settings.replace(**changes)
        return self._app


def _state(ctx: click.Context) -> State:
    return ctx.ensure_object(State)


def _begin(ctx: click.Context, level: str | None = None, logfile: str | None = None, *, worker: bool = False) -> App:
    """Load the app and set up logging. Faust-setting notices are written once, by the worker only;
    other commands log warnings and errors unless -l says otherwise."""
    state = _state(ctx)
    app = state.app()
    level = level or state.loglevel
    logfile = logfile or state.logfile
    setup_logging(level or (app.settings.loglevel if worker else "WARNING"), logfile, app, worker=worker)
    if worker:
        faust_args.flush_deferred_logs()
    else:
        faust_args.drop_deferred_logs()
    return app


class AppGroup(click.Group):
    """Built-in commands plus the app's ``@app.command``s (built-in names win)."""

    def _app_commands(self, ctx: click.Context) -> dict[str, click.Command]:
        state = _state(ctx)
        if state._app is None and not state.spec:
            return dict(registered)  # class-defined commands that need no app
        try:
            app = state.app()  # loading the app's module defines its command classes too
            if not state.discovered:  # Faust's autodiscover: @app.command in the discovered modules too
                state.discovered = True
                from .autodiscover import autodiscover_modules

                autodiscover_modules(app)
        except AgentStreamError:
            return {}  # reported by the command that needs the app
        return {**registered, **app.commands}

    def list_commands(self, ctx: click.Context) -> list[str]:
        builtin = super().list_commands(ctx)
        return builtin + sorted(n for n in self._app_commands(ctx) if n not in builtin)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        cmd = super().get_command(ctx, cmd_name)
        if cmd is not None:
            return cmd
        state = _state(ctx)
        if state._app is None and state.spec:
            state.app()  # a broken module is reported as such, not as "no such command"
        return self._app_commands(ctx).get(cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = click.utils.make_str(args[0]) if args else ""
        if args and not name.startswith("-") and self.get_command(ctx, name) is None:
            close = difflib.get_close_matches(name, self.list_commands(ctx), n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise click.UsageError(f"no such command {name!r}.{hint} (agentstream --help lists them)", ctx)
        return super().resolve_command(ctx, args)


def _set_spec(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value:
        _state(ctx).spec = value
    return value


def _set_workdir(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Faust's -W/--workdir: change to it before the app is imported (so -A resolves there)."""
    if value:
        os.chdir(Path(value).absolute())
        _state(ctx).workdir = value
    return value


def _set_loop(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value in ("eventlet", "gevent"):
        raise click.BadParameter(
            f"{value}: agentstream runs on asyncio (its event loop, or uvloop's); use -L aio or -L uvloop",
            ctx,
            param,
        )
    _state(ctx).loop = value
    return value


@click.group(cls=AppGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.option(
    "-A",
    "--app",
    "app_spec",
    is_eager=True,
    expose_value=False,
    callback=_set_spec,
    help="the app module, e.g. apps.wordcount or apps.wordcount:app",
)
@click.option("-l", "--loglevel", default=None, help="log level: debug, info, warning, error (default: the app's)")
@click.option("-f", "--logfile", default=None, help="log to this file instead of stderr (every command)")
@click.option(
    "-D",
    "--datadir",
    "--data-dir",
    "datadir",
    type=click.Path(path_type=Path),
    default=None,
    help="the app's data directory (its data_dir setting) for every command; a worker's --data-dir wins",
)
@click.option("--debug/--no-debug", default=None, help="asyncio's debug mode in the worker (the app's debug setting)")
@click.option("--json", "as_json", is_flag=True, help="listing commands print JSON (as their own --json)")
@click.option(
    "-q", "--quiet/--no-quiet", default=False, help="no output to stdout from commands (a worker's log stays)"
)
@click.option(
    "-W",
    "--workdir",
    is_eager=True,
    expose_value=False,
    callback=_set_workdir,
    type=click.Path(file_okay=False),
    help="change to this directory first (before the app is imported)",
)
@click.option(
    "-L",
    "--loop",
    type=click.Choice(LOOPS),
    default=None,
    is_eager=True,
    expose_value=False,
    callback=_set_loop,
    help="event loop: aio (asyncio's) or uvloop (the default); eventlet and gevent are refused",
)
@click.version_option(__version__, "--version", prog_name="agentstream", message="%(prog)s %(version)s")
@click.pass_context
def cli(
    ctx: click.Context,
    loglevel: str | None,
    logfile: str | None,
    datadir: Path | None,
    debug: bool | None,
    as_json: bool,
    quiet: bool,
) -> None:
    """Faust-style stream processing on Kafka."""
    state = _state(ctx)
    state.loglevel = loglevel
    state.logfile = logfile
    state.datadir = datadir if datadir is not None else state.datadir
    state.debug = debug if debug is not None else state.debug
    state.json = as_json
    state.quiet = quiet
    if state._configured and (datadir is not None or debug is not None):
        state._configured = False  # the app was loaded to find an @app.command: apply them now
    if quiet and ctx.invoked_subcommand != "worker":  # Faust's -q: the command's output is silenced
        ctx.with_resource(contextlib.redirect_stdout(open(os.devnull, "w")))


# -- worker -----------------------------------------------------------------------------------------------------------
def _click_type(tp: Any) -> Any:
    """click's type for a setting's type; None for settings that have no command-line form."""
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if args and len(args) == 1:  # X | None
        tp = args[0]
    if tp is bool:
        return bool
    if tp is int:
        return click.INT
    if tp is float:
        return click.FLOAT
    if tp is Path:
        return click.Path(path_type=Path)
    if tp is str:
        return click.STRING
    return None


def _setting_options(fun: Callable[..., Any]) -> Callable[..., Any]:
    """One ``--<setting>`` flag per setting (bools as ``--x/--no-x``), plus the old spellings."""
    for f, tp in reversed(setting_fields()):
        ctype = _click_type(tp)
        if ctype is None:
            continue
        dash = f.name.replace("_", "-")
        helptext = setting_help(f, tp)
        if ctype is bool:
            fun = click.option(f"--{dash}/--no-{dash}", f.name, default=None, help=helptext)(fun)
        else:
            fun = click.option(
                f"--{dash}",
                *FLAG_ALIASES.get(f.name, ()),
                f.name,
                type=ctype,
                default=None,
                help=helptext,
                metavar=f.name.split("_")[-1].upper(),
            )(fun)
    return fun


@cli.command(context_settings={"help_option_names": ["--help"]})  # -h is the web host, as in Faust
@_setting_options
@click.option(
    "--with-web/--without-web",
    "with_web",
    default=None,
    help="start the web server or not (same as --web-enabled/--no-web-enabled)",
)
@click.option("-f", "--logfile", default=None, help="log to this file instead of stderr")
@click.pass_context
def worker(ctx: click.Context, /, with_web: bool | None, logfile: str | None, **settings: Any) -> int:
    """Run a worker: join the group and process the assigned partitions. As in Faust, -b is the web
    bind address, -h the web host and -p the web port; the broker is --broker."""
    from .web import run_worker
    from .worker.worker import Worker

    changes = {name: value for name, value in settings.items() if value is not None}
    if with_web is not None:
        changes["web_enabled"] = with_web
    app = _state(ctx).app()
    if changes:  # before logging is set up: --log-format and --loglevel are settings too
        app.settings = app.settings.replace(**changes)
    app = _begin(ctx, changes.get("loglevel"), logfile, worker=True)

    async def _go() -> int:
        return await run_worker(Worker(app, install_signal_handlers=True))

    worker_gc()  # start-up's heap frozen, young collections less often (agentstream.bulk_gc)

    return int(_run(_go()))


# -- send -------------------------------------------------------------------------------------------------------------
def parse_value(raw: str | None) -> Any:
    """A command-line value: JSON when it looks like JSON (object, array, string, number, true/false/
    null), else the text itself. Something that starts like JSON and does not parse is an error
    naming the column, not a string the topic's codec rejects later."""
    if raw is None:
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if raw.lstrip()[:1] in ("{", "[", '"'):
            raise click.BadParameter(
                f"invalid JSON at column {exc.colno}: {exc.msg} (in {raw!r})", param_hint="VALUE"
            ) from None
        return raw


@cli.command()
@click.argument("topic")
@click.argument("value", required=False, default=None)
@click.option("-k", "--key", default=None, help="the record's key (text)")
@click.option(
    "--partition",
    type=click.IntRange(min=0),
    default=None,
    help="send to this partition instead of the key's (or round-robin)",
)
@click.option("-r", "--repeat", type=click.IntRange(min=1), default=1, help="send the record this many times")
@click.option("-b", "--broker", default=None, help="broker URL (default: the app's)")
@click.option(
    "-K", "--key-type", default=None, help="a model (module.Model, or a model of the app) the key is made into"
)
@click.option("-V", "--value-type", default=None, help="a model the value is made into (VALUE: its JSON)")
@click.option("--key-serializer", default=None, help="the codec the key is read and sent with (e.g. json, raw)")
@click.option("--value-serializer", default=None, help="the codec the value is read and sent with")
@click.pass_context
def send(
    ctx: click.Context,
    topic: str,
    value: str | None,
    key: str | None,
    partition: int | None,
    repeat: int,
    broker: str | None,
    key_type: str | None,
    value_type: str | None,
    key_serializer: str | None,
    value_serializer: str | None,
) -> int:
    """Send one record to a topic, or to an agent by its name or as Faust writes it, @agent (its
    name or import path). VALUE is JSON or plain text; with --value-type it is that model's data
    (read with --value-serializer, default json), as Faust's ``send`` reads it."""
    app = _begin(ctx)
    parsed = parse_value(value) if value_type is None else _as_model(app, value_type, value, value_serializer)
    key_value: Any = key if key_type is None else _as_model(app, key_type, key, key_serializer)
    if broker:
        app.settings = app.settings.replace(broker=broker)
    target: Any = _agent_ref(app, topic[1:]) if topic.startswith("@") else None
    target = target or app.topics.get(topic) or next((a.channel for a in app.agents.values() if a.name == topic), None)
    if target is None:  # Faust sends to any topic; a typo would silently make a new one, so say so
        known = sorted(set(app.topics) | set(app.agents))
        close = difflib.get_close_matches(topic, known, n=1)
        click.echo(
            f"note: {topic!r} is neither a topic nor an agent of app {app.id!r}"
            + (f" (did you mean {close[0]!r}?)" if close else ""),
            err=True,
        )
        target = app.topic(topic)
    chosen = target

    serializers = {"key_serializer": key_serializer, "value_serializer": value_serializer}
    send_with = {k: v for k, v in serializers.items() if v is not None}
    if send_with:
        channel = getattr(chosen, "channel", chosen)  # an agent's records go to its topic
        if hasattr(channel, "send_raw"):
            chosen = channel

    async def _go() -> int:
        for _ in range(repeat):
            if send_with:
                fut = await app.send(
                    chosen,
                    key=key_value,
                    value=parsed,
                    partition=partition,
                    key_serializer=key_serializer,
                    value_serializer=value_serializer,
                )
            else:
                fut = await chosen.send(key=key_value, value=parsed, partition=partition)
            md = await fut
            click.echo(orjson.dumps({"topic": md.topic, "partition": md.partition, "offset": md.offset}).decode())
        return 0

    return int(_run(then_stop_clients(app, _go())))


def _model_class(app: App, name: str) -> Any:
    """Faust's ``send --value-type``: ``module.Model``/``module:Model``, a model under the app's
    ``origin`` (``<origin>.models.Model``, ``<origin>.Model``), or a model of the app by name."""
    from .commands import app_models
    from .settings import import_object

    origin = str(app.settings.extra.get("origin") or "").partition(":")[0]
    candidates = [name] + ([f"{origin}.models.{name}", f"{origin}.{name}"] if origin else [])
    for path in candidates:
        if "." not in path and ":" not in path:
            continue
        try:
            return import_object(path)
        except (ImportError, AttributeError):
            continue
    found = [m for m in app_models(app) if name in (m._options.namespace, m.__name__, m.__qualname__)]  # type: ignore[attr-defined]
    if found:
        return found[0]
    raise click.BadParameter(f"{name!r} names no model (module.Model, or a model of the app)", param_hint="TYPE")


def _as_model(app: App, type_name: str, raw: str | None, serializer: str | None) -> Any:
    """``raw`` read into the model ``type_name`` with ``serializer`` (default json), as Faust's
    ``to_model``; a value that does not fit is an error naming the option."""
    if raw is None:
        return None
    model = _model_class(app, type_name)
    try:
        return model.loads(raw.encode(), serializer=serializer or "json")
    except Exception as exc:
        raise click.BadParameter(f"{raw!r} is not a {type_name}: {exc}", param_hint="VALUE/--key") from None


def _agent_ref(app: App, ref: str) -> Any:
    """Faust's ``send @agent``: an agent of the app by its name, or by its import path
    (``module.attr`` / ``module:attr``, as Faust resolves it); the record goes to its channel."""
    agent = app.agents.get(ref)
    if agent is not None:
        return agent
    if "." in ref or ":" in ref:
        module_name, _, attr = ref.replace(":", ".").rpartition(".")
        try:
            found = getattr(importlib.import_module(module_name), attr, None)
        except ImportError:
            found = None
        if found is not None and hasattr(found, "channel") and hasattr(found, "send"):
            return found
    known = sorted(app.agents)
    raise click.BadParameter(
        f"@{ref} names no agent of app {app.id!r} (agents: {', '.join(known) or 'none'})", param_hint="TOPIC"
    )


# -- listings ---------------------------------------------------------------------------------------------------------
JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="print JSON (one document) instead of text")


def _discover(app: App) -> None:
    """Import the modules the ``autodiscover`` setting lists (their agents and topics). No agent
    code runs here: a listing never runs an agent's preamble (the split points a ``group_by`` or
    ``through`` makes are found by a worker, from its agents' first instances)."""
    from .autodiscover import autodiscover_modules

    autodiscover_modules(app)  # Faust's autodiscover setting: agents declared in other modules


@cli.command()
@JSON_OPTION
@click.pass_context
def agents(ctx: click.Context, as_json: bool) -> int:
    """List the agents (as Faust's: name, topics, help); no agent code runs.

    The split points (``group_by``/``through``) and the sub-topologies they make are found by a
    worker, from its agents' first instances: it logs them at start ("topology of <app>")."""
    as_json = as_json or _state(ctx).json  # Faust's --json before the command
    app = _begin(ctx)
    _discover(app)
    rows: list[dict[str, Any]] = [
        {
            "name": a.name,
            "topics": [t.name for t in a.topics],
            "concurrency": a.concurrency,
            "help": getattr(a, "help", ""),
        }
        for a in app.agents.values()
    ]
    return print_rows(
        rows,
        as_json,
        lambda r: (
            f"{r['name']}: topics={','.join(r['topics'])} concurrency={r['concurrency']}"
            + (f"  {r['help'].splitlines()[0]}" if r["help"] else "")
        ),
        document={"agents": rows},
    )


@cli.command()
@JSON_OPTION
@click.pass_context
def topics(ctx: click.Context, as_json: bool) -> int:
    """List the topics the app declares (sources, sinks, internal and changelog topics); the
    repartition topics of ``group_by`` are the worker's (it finds them when it starts)."""
    as_json = as_json or _state(ctx).json  # Faust's --json before the command
    app = _begin(ctx)
    _discover(app)
    changelogs = {t.changelog_topic.name for t in app.tables.values()}
    rows = [
        {"name": name, "partitions": topic.partitions, "kind": "internal" if topic.internal else "topic"}
        for name, topic in sorted(app.topics.items())
        if name not in changelogs
    ]
    rows += [
        {"name": t.changelog_topic.name, "partitions": t.changelog_topic.partitions, "kind": "changelog"}
        for t in app.tables.values()
    ]
    return print_rows(rows, as_json, lambda r: f"{r['name']}\tpartitions={r['partitions']}\t{r['kind']}")


@cli.command()
@JSON_OPTION
@click.pass_context
def tables(ctx: click.Context, as_json: bool) -> int:
    """List the tables: kind, store, partitions, changelog topic, windowing."""
    as_json = as_json or _state(ctx).json  # Faust's --json before the command
    app = _begin(ctx)
    rows: list[dict[str, Any]] = []
    for name, table in sorted(app.tables.items()):
        state = table._windowed
        window: dict[str, Any] | None = None
        if getattr(state, "is_session", False):
            window = {"kind": "session", "gap": state.window.gap, "grace": state.grace}
        elif state is not None:
            w = state.window
            window = {
                "kind": "tumbling" if w.step == w.size else "hopping",
                "size": w.size,
                "step": w.step,
                "expires": w.expires,
                "grace": state.grace,
            }
        rows.append(
            {
                "name": name,
                "kind": type(table).__name__,
                "store": table.store_url or app.settings.store,
                "partitions": table.partitions,
                "changelog": table.changelog_topic.name,
                "window": window,
            }
        )
    return print_rows(rows, as_json, _table_line, empty="(no tables)")


def _table_line(r: dict[str, Any]) -> str:
    w = r["window"]
    if w is None:
        windowing = "-"
    elif w["kind"] == "session":
        windowing = f"session gap={w['gap']:g}s grace={w['grace']:g}s"
    else:
        kind = "tumbling" if w["kind"] == "tumbling" else f"hopping step={w['step']:g}s"
        windowing = f"{kind} size={w['size']:g}s expires={w['expires']:g}s grace={w['grace']:g}s"
    return (
        f"{r['name']}\tkind={r['kind']}\tstore={r['store']}\tpartitions={r['partitions']}\t"
        f"changelog={r['changelog']}\twindow={windowing}"
    )


@cli.command()
@JSON_OPTION
@click.pass_context
def models(ctx: click.Context, as_json: bool) -> int:
    """List the app's Record models (Faust's ``models``)."""
    as_json = as_json or _state(ctx).json  # Faust's --json before the command
    from .commands import print_models

    return print_models(_begin(ctx), as_json)


@cli.command()
@click.argument("name")
@click.pass_context
def model(ctx: click.Context, name: str) -> int:
    """Show a model's fields, types and defaults (NAME: class name or namespace)."""
    from .commands import print_model

    return print_model(_begin(ctx), name)


# -- export, reset, dev broker ----------------------------------------------------------------------------------------
@cli.command()
@click.argument("table")
@click.option(
    "-o",
    "--out",
    required=True,
    type=click.Path(),
    help="output directory (replaced; with --follow: maintained). On a multi-host cluster: storage every executor reaches",
)
@click.option(
    "--format",
    "export_format",
    type=click.Choice(["parquet", "csv", "json"]),
    default="parquet",
    show_default=True,
    help="output format",
)
@click.option(
    "--master",
    default=None,
    help="Spark master URL (default local[*]); on a cluster agentstream and the app's module are shipped to the "
    "executors, whose Python (--conf spark.pyspark.python=...) must have agentstream's dependencies",
)
@click.option("--all-versions", is_flag=True, help="every changelog record, not the latest value per key")
@click.option("-b", "--broker", default=None, help="broker URL (default: the app's)")
@click.option(
    "--conf",
    "spark_conf",
    multiple=True,
    metavar="KEY=VALUE",
    help="a Spark setting (repeatable), e.g. --conf spark.executor.memory=2g",
)
@click.option(
    "--follow",
    is_flag=True,
    help="keep --out's Parquet holding the latest value per key as the table changes (until SIGINT/SIGTERM; "
    "resumes from its checkpoint in --out)",
)
@click.option("--interval", default=1.0, show_default=True, type=float, help="--follow: seconds between micro-batches")
@click.pass_context
def export(
    ctx: click.Context,
    table: str,
    out: str,
    export_format: str,
    master: str | None,
    all_versions: bool,
    broker: str | None,
    spark_conf: tuple[str, ...],
    follow: bool,
    interval: float,
) -> int:
    """Export a table (its changelog) with Spark: needs agentstream[spark] and Java 17."""
    from .exporter.command import cli_export

    app = _begin(ctx)
    conf: dict[str, str] = {}
    for item in spark_conf:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="--conf")
        conf[key.strip()] = value
    logging.getLogger("agentstream.exporter").setLevel(logging.INFO)
    return cli_export(
        app,
        table,
        out,
        fmt=export_format,
        master=master,
        all_versions=all_versions,
        broker=broker,
        conf=conf,
        follow=follow,
        interval=interval,
        app_spec=_state(ctx).spec,
    )


@cli.command()
@click.option(
    "--data-dir",
    "--datadir",
    "data_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="where table stores live (default: the app's)",
)
@click.option("--offsets", is_flag=True, help="also reset the group's offsets to the earliest")
@click.option("-y", "--yes", is_flag=True, help="do it (without: print what would be done)")
@click.option("-b", "--broker", default=None, help="broker URL (default: the app's)")
@click.pass_context
def reset(ctx: click.Context, data_dir: Path | None, offsets: bool, yes: bool, broker: str | None) -> int:
    """Delete the app's local table stores (restored from the changelogs on start); --offsets also
    rewinds the consumer group. Refuses while a worker of the app is running."""
    from .commands import reset_app

    app = _begin(ctx)
    changes: dict[str, Any] = {}
    if data_dir:
        changes["data_dir"] = data_dir
    if broker:
        changes["broker"] = broker
    if changes:
        app.settings = app.settings.replace(**changes)
    return reset_app(app, offsets=offsets, yes=yes)


@cli.group("dead-letters", invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="one JSON object per dead letter")
@click.option("-b", "--broker", default=None, help="broker URL (default: the app's)")
@click.pass_context
def dead_letters(ctx: click.Context, as_json: bool, broker: str | None) -> int:
    """List the records in the app's dead-letter topic: partition@offset, exception, message and the
    record they were (topic[partition]@offset). ``dead-letters replay`` sends chosen ones back."""
    from .dead_letters import read_dead_letters

    app = _begin(ctx)
    if broker:
        app.settings = app.settings.replace(broker=broker)
    if ctx.invoked_subcommand is not None:
        return 0
    letters = _run(then_stop_clients(app, read_dead_letters(app)))
    if as_json:
        for d in letters:
            click.echo(orjson.dumps(d.as_json()).decode())
        return 0
    click.echo(f"{app.settings.dead_letter_topic}: {len(letters)} dead letter(s)")
    for d in letters:
        click.echo(f"{d.partition}@{d.offset}  {d.source}  {d.exception}: {d.message}".rstrip())
    return 0


@dead_letters.command("replay")
@click.option("--all", "everything", is_flag=True, help="every dead letter")
@click.option("--partition", type=click.IntRange(min=0), default=None, help="of the dead-letter topic")
@click.option("--from", "first", type=click.IntRange(min=0), default=None, help="first dead-letter offset (inclusive)")
@click.option("--to", "last", type=click.IntRange(min=0), default=None, help="last dead-letter offset (inclusive)")
@click.option("--source-topic", default=None, help="only letters that came from this topic")
@click.option("-y", "--yes", is_flag=True, help="send them (without: print what would be sent)")
@click.pass_context
def dead_letters_replay(
    ctx: click.Context,
    everything: bool,
    partition: int | None,
    first: int | None,
    last: int | None,
    source_topic: str | None,
    yes: bool,
) -> int:
    """Send chosen dead letters back to the topics they came from (key, value and timestamp as they
    were, headers without the error headers), once the bug is fixed: --all, or a range of the
    dead-letter topic (--partition, --from, --to) and/or --source-topic. Replaying twice sends twice."""
    from .dead_letters import choose, read_dead_letters, replay

    if not everything and partition is None and first is None and last is None and source_topic is None:
        raise click.UsageError("choose the letters: --all, or --partition/--from/--to/--source-topic")
    app = _state(ctx).app()

    async def _go() -> int:
        letters = choose(
            await read_dead_letters(app), partition=partition, first=first, last=last, source_topic=source_topic
        )
        for d in letters:
            click.echo(f"{d.partition}@{d.offset} -> {d.source_topic}  ({d.exception}: {d.message})")
        if not yes:
            click.echo(f"{len(letters)} dead letter(s) chosen; nothing sent: pass --yes to send them")
            return 1
        try:
            sent = await replay(app, letters)
        except ValueError as exc:
            click.echo(f"agentstream: replay refused: {exc}", err=True)
            return 2
        for d, md in sent:
            click.echo(
                orjson.dumps(
                    {
                        "from": f"{d.partition}@{d.offset}",
                        "topic": md.topic,
                        "partition": md.partition,
                        "offset": md.offset,
                    }
                ).decode()
            )
        click.echo(f"replayed {len(sent)} dead letter(s)")
        return 0

    return int(_run(then_stop_clients(app, _go())))


@cli.command("clean-versions")
@click.option(
    "--data-dir",
    "--datadir",
    "data_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="where table stores live (default: the app's)",
)
@click.pass_context
def clean_versions(ctx: click.Context, data_dir: Path | None) -> int:
    """Delete the data directories of older versions of the app (Faust's ``clean-versions``):
    ``<data_dir>/<id>-v<N>`` and Faust's ``<data_dir>/<id>-data/v<N>`` for N below the app's
    ``version`` setting. The current version's stores are kept."""
    from .commands import clean_versions as _clean

    app = _begin(ctx)
    for path in _clean(app, data_dir):
        click.echo(f"removed {path}")
    return 0


@cli.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]), default="bash")
def completion(shell: str) -> int:
    """Print the shell completion script (``eval "$(agentstream completion bash)"``)."""
    from click.shell_completion import get_completion_class

    cls = get_completion_class(shell)
    assert cls is not None
    click.echo(cls(cli, {}, "agentstream", "_AGENTSTREAM_COMPLETE").source())
    return 0


@cli.command("dev-broker")
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=9092,
    show_default=True,
    help="TCP port on 127.0.0.1 the broker listens on",
)
@click.pass_context
def dev_broker(ctx: click.Context, port: int) -> int:
    """Run the local Kafka-protocol dev broker (tansu; memory only)."""
    from .devbroker import run_foreground

    setup_logging(_state(ctx).loglevel or "INFO")
    return run_foreground(port)


# -- entry point ------------------------------------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None, app: App | None = None) -> int:
    """Run the CLI and return its exit status (2 for usage and configuration errors)."""
    try:
        result = cli.main(
            args=list(argv) if argv is not None else None,
            prog_name="agentstream",
            standalone_mode=False,
            obj=State(app),
        )
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.Abort:
        click.echo("aborted", err=True)
        return 130
    except AgentStreamError as exc:
        click.echo(f"agentstream: error: {exc}", err=True)
        return 2
    except KeyboardInterrupt:
        return 130
    if isinstance(result, int) and not isinstance(result, bool):
        return result
    return 0
