"""App-defined CLI commands (Faust's ``@app.command``) and the logic behind the built-in verbs
``models``, ``model`` and ``reset`` (cli.py only wires them).

Faust's commands are click commands: ``option``/``argument`` *are* click's, so every click
attribute works. The command function gets its parameters as keyword arguments and, when its
first positional parameter is not one of them, the :class:`AppCommand` as ``self`` (``self.app``,
``self.say()``), as in Faust. ``async`` commands run on an event loop that stops the app's clients.
"""

from __future__ import annotations

import asyncio
import fcntl
import inspect
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
import orjson

from .exceptions import AgentStreamError

if TYPE_CHECKING:
    from .types import AppT as App  # the App's interface: app.py imports this module

__all__ = [
    "option",
    "argument",
    "AppCommand",
    "Command",
    "register",
    "registered",
    "run_command",
    "StillRunning",
    "print_rows",
    "then_stop_clients",
]

_T = TypeVar("_T")

option = click.option
argument = click.argument

registered: dict[str, click.Command] = {}
"""Commands defined as classes (Faust's ``class Report(AppCommand)``, ``@app.command(base=...)``): the
CLI offers them beside the app's own, as Faust's does (agentstream.faust.cli adds them here)."""


class AppCommand:
    """What a command's ``self`` is: the app plus Faust's output helpers."""

    def __init__(self, app: App, name: str) -> None:
        self.app = app
        self.name = name

    def say(self, message: Any = "", *, file: Any = None, err: bool = False, **kwargs: Any) -> None:
        click.echo(message, file=file, err=err)

    def carp(self, message: Any, **kwargs: Any) -> None:
        click.echo(message, err=True)

    def abort(self, message: str = "", code: int = 1) -> None:
        if message:
            self.carp(message)
        raise SystemExit(code)


Command = AppCommand


def register(app: App, decorators: tuple[Any, ...], name: str | None, help: str | None) -> Callable[[Any], Any]:
    """``@app.command(option(...), argument(...))``: build a click command and keep it on the app."""

    def _decorate(fun: Callable[..., Any]) -> Callable[..., Any]:
        cmd_name = str(name or getattr(fun, "__name__", "command")).replace("_", "-")

        def probe() -> None:  # collects the parameters the decorators declare
            pass

        for deco in reversed(decorators):
            deco(probe)
        params: list[click.Parameter] = list(reversed(getattr(probe, "__click_params__", [])))
        declared = {p.name for p in params}
        sig = inspect.signature(fun).parameters
        positional = [n for n, p in sig.items() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        # Faust passes the command object when the function takes a parameter its options don't fill.
        takes_self = bool(positional) and positional[0] not in declared
        doc = (fun.__doc__ or "").strip()

        def callback(**kwargs: Any) -> int:
            return run_command(app, cmd_name, fun, takes_self, kwargs)

        app.commands[cmd_name] = click.Command(
            cmd_name, callback=callback, params=params, help=help or doc or None, short_help=help or None
        )
        return fun

    return _decorate


def run_command(app: App, name: str, fun: Callable[..., Any], takes_self: bool, kwargs: dict[str, Any]) -> int:
    """Call the command; ``async`` commands run on an event loop that stops the app's clients."""
    call_args = (AppCommand(app, name),) if takes_self else ()
    result = fun(*call_args, **kwargs)
    if inspect.isawaitable(result):
        result = asyncio.run(then_stop_clients(app, result))
    return result if isinstance(result, int) and not isinstance(result, bool) else 0


async def then_stop_clients(app: App, awaitable: Awaitable[_T]) -> _T:
    """Await ``awaitable``, then stop the app's clients: how every command's event loop ends."""
    try:
        return await awaitable
    finally:
        await app.stop_clients()


# -- built-in Faust verbs whose logic lives here ----------------------------------------------------------------------
def print_rows(
    rows: list[dict[str, Any]],
    as_json: bool,
    line: Callable[[dict[str, Any]], str],
    *,
    empty: str | None = None,
    document: Any = None,
) -> int:
    """How every listing verb prints: ``--json`` one document (``document``, else the rows), else a
    text line per row (``empty`` when there are none)."""
    if as_json:
        click.echo(orjson.dumps(rows if document is None else document).decode())
        return 0
    if not rows and empty is not None:
        click.echo(empty)
    for row in rows:
        click.echo(line(row))
    return 0


def app_models(app: App) -> list[type]:
    """The Record models the app's modules define (agentstream's own excluded)."""
    from .models import registry

    return [m for ns, m in sorted(registry.items()) if not m.__module__.startswith("agentstream.")]


def print_models(app: App, as_json: bool = False) -> int:
    """``agentstream -A app models``: namespace and first docstring line of every model."""
    rows: list[dict[str, Any]] = []
    for m in app_models(app):
        doc = (m.__doc__ or "").strip().splitlines()
        summary = doc[0] if doc and not doc[0].startswith(m.__name__ + "(") else ""
        rows.append({"namespace": m._options.namespace, "name": m.__name__, "doc": summary})  # type: ignore[attr-defined]
    return print_rows(rows, as_json, lambda row: f"{row['namespace']}\t{row['doc']}", empty="(no models)")


def print_model(app: App, name: str) -> int:
    """``agentstream -A app model NAME``: the model's fields with their types and defaults."""
    import dataclasses
    import typing

    models = app_models(app)
    found = [m for m in models if name in (m._options.namespace, m.__name__, m.__qualname__)]  # type: ignore[attr-defined]
    if not found:
        names = ", ".join(m.__name__ for m in models) or "(none)"
        click.echo(f"agentstream: error: no model named {name!r} (models: {names})", err=True)
        return 2
    model = found[0]
    try:
        hints = typing.get_type_hints(model)
    except Exception:  # forward references that do not resolve: show the raw annotations
        hints = {}
    click.echo(f"{model._options.namespace}")  # type: ignore[attr-defined]
    for f in dataclasses.fields(model):
        tp = hints.get(f.name, f.type)
        type_name = tp.__name__ if isinstance(tp, type) else str(tp).replace("typing.", "")
        if f.default is not dataclasses.MISSING:
            default = repr(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            default = f"{getattr(f.default_factory, '__name__', 'factory')}()"
        else:
            default = "*"
        click.echo(f"  {f.name}\t{type_name}\tdefault={default}")
    return 0


class StillRunning(Exception):
    """``reset`` found a live worker of the app (a group member or a held store lock)."""


def held_store_locks(root: Path) -> list[Path]:
    """RocksDB LOCK files under ``root`` that another process holds (a running worker)."""
    held: list[Path] = []
    for lock in sorted(root.rglob("LOCK")) if root.exists() else []:
        try:
            with open(lock, "rb+") as fh:
                try:
                    fcntl.lockf(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    held.append(lock)
                else:
                    fcntl.lockf(fh, fcntl.LOCK_UN)
        except OSError:
            continue
    return held


async def live_group_members(app: App) -> list[str]:
    """The members of the app's consumer group (DescribeGroups on ``kafka://``)."""
    return await app.transport.group_members(app.id)


def check_not_running(app: App, root: Path) -> None:
    """Raise :class:`StillRunning` when a worker of the app is alive: reset must not pull its
    stores from under it (the worker would fail minutes later on a vanished store)."""
    locks = held_store_locks(root)
    if locks:
        raise StillRunning(
            f"store lock held: {locks[0]} (a worker of {app.id!r} is running on this data dir). "
            "Stop every worker of the app, then run reset again"
        )

    try:
        members = asyncio.run(then_stop_clients(app, live_group_members(app)))
    except AgentStreamError as exc:  # no broker: no remote member can use these local stores
        click.echo(
            f"note: could not ask the broker for the group's members ({exc}); checked the local store locks only",
            err=True,
        )
        return
    if members:
        raise StillRunning(
            f"consumer group {app.id!r} has {len(members)} live member(s): {', '.join(members)}. "
            "Stop every worker of the app (their session must have ended), then run reset again"
        )


async def source_topics_without_running_agents(app: App) -> list[str]:
    """The topics the app's workers read, found without running agent code: each agent's own
    topics, and the repartition topics of the app (``<id>-...-repartition``) that exist on the
    broker. A ``through()`` topic is one only when an agent also reads it directly."""
    names = {t.name for agent in app.agents.values() for t in agent.topics}
    prefix = f"{app.id}-"
    names.update(n for n in await app.transport.list_topics() if n.startswith(prefix) and n.endswith("-repartition"))
    return sorted(names)


def reset_app(app: App, *, offsets: bool, yes: bool) -> int:
    """``agentstream -A app reset``: delete this app's local table stores (they restore from the
    changelogs on the next start, as in Faust); with ``--offsets`` also rewind the consumer group to
    the earliest offsets of the app's source topics. Refuses without ``--yes`` (prints the plan), and
    refuses while a worker of the app is alive."""
    import shutil

    from .transport.base import TP

    root = app.settings.table_root()
    click.echo(f"local table stores: {root}{'' if root.exists() else ' (none)'}")
    topics: list[str] = []
    if offsets:

        async def _sources() -> list[str]:
            # No agent code runs here: the agents' own topics, and the app's repartition topics
            # (a group_by's) as they exist on the broker.
            return await source_topics_without_running_agents(app)

        # its own event loop, so the clients it started stop with it (check_not_running and the
        # rewind below run theirs on other loops)
        topics = asyncio.run(then_stop_clients(app, _sources()))
        click.echo(
            f"consumer group {app.id!r}: rewind {', '.join(topics) or '(no source topics)'} to the earliest offset"
        )
        if app.tables:
            click.echo(
                "note: tables are restored from their changelogs, so re-processed records are counted again "
                "on top; delete the changelog topics too for a clean re-run"
            )
    if not yes:
        click.echo("nothing done: pass --yes to do it (stop every worker of the app first)")
        return 1
    try:
        check_not_running(app, root)
    except StillRunning as exc:
        click.echo(f"agentstream: reset refused: {exc}", err=True)
        return 2
    if root.exists():
        shutil.rmtree(root)
        click.echo(f"deleted {root}")
    if topics:

        async def _rewind() -> None:
            transport = app.transport
            consumer = transport.consumer(group_id=app.id, **app.consumer_settings())
            tps: list[TP] = []
            for t in topics:
                n = await transport.partition_count(t)
                tps.extend(TP(t, p) for p in range(n or 0))
            consumer.assign(tps)
            await consumer.start()
            try:
                await consumer.commit({tp: 0 for tp in tps})
            finally:
                await consumer.stop()

        asyncio.run(then_stop_clients(app, _rewind()))
        click.echo(f"rewound group {app.id!r} on {len(topics)} topics (offset 0 = the earliest still kept)")
    return 0


def clean_versions(app: Any, data_dir: Path | None = None) -> list[Path]:
    """Remove the data directories of the app's older versions; returns what was removed.

    Older versions are ``<data_dir>/<id>-v<N>`` (and Faust's ``<data_dir>/<id>-data/v<N>``) with
    ``N`` below the ``version`` setting (default 1, so only explicitly older ones go)."""
    import re
    import shutil
    from pathlib import Path

    root = Path(data_dir or app.settings.data_dir)
    current = int(app.settings.version or 1)
    base = re.sub(rf"-v{current}$", "", app.id)  # with topic_naming='faust' the id carries -v<version>
    removed: list[Path] = []
    pattern = re.compile(rf"^{re.escape(base)}-v(\d+)$")
    candidates = [(p, pattern.match(p.name)) for p in root.iterdir()] if root.is_dir() else []
    faust_dir = root / f"{base}-data"
    if faust_dir.is_dir():
        candidates += [(p, re.match(r"^v(\d+)$", p.name)) for p in faust_dir.iterdir()]
    for path, m in candidates:
        if m is not None and path.is_dir() and int(m.group(1)) < current:
            shutil.rmtree(path)
            removed.append(path)
    return sorted(removed)
