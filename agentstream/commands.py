"""App-defined CLI commands (Faust's ``@app.command`` with ``faust.cli.option``/``argument``).

Faust builds commands with click; agentstream's CLI is argparse (no extra dependency), so
``option``/``argument`` record click-style declarations and translate the common attributes
(``type``, ``default``, ``help``, ``required``, ``is_flag``, ``multiple``, ``count``, ``nargs``,
``--flag/--no-flag``) to argparse. The command function gets its options as keyword arguments
(click's names: ``--dry-run`` -> ``dry_run``) and, when it takes a first parameter besides them,
the :class:`AppCommand` as ``self`` (``self.app``, ``self.say()``), as in Faust.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import sys
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from .app import App

__all__ = ["option", "argument", "AppCommand", "Command", "add_parsers", "run_command"]


class Param:
    """One click-style declaration: ``option('--x', '-x', type=int, default=1, help=...)``."""

    def __init__(self, kind: str, decls: tuple[str, ...], attrs: dict[str, Any]) -> None:
        self.kind = kind
        self.decls = decls
        self.attrs = attrs

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        a = dict(self.attrs)
        kw: dict[str, Any] = {}
        for key in ("help", "required", "metavar"):
            if key in a:
                kw[key] = a.pop(key)
        typ = a.pop("type", None)
        if callable(typ) and typ is not bool:
            kw["type"] = typ
        names = [d for d in self.decls if d.startswith("-")]
        dests = [d for d in self.decls if not d.startswith("-")]
        if self.kind == "argument":
            dest = dests[0] if dests else names[0].lstrip("-")
            nargs = a.pop("nargs", None)
            if nargs == -1:
                kw["nargs"] = "*"
            elif isinstance(nargs, int) and nargs > 1:
                kw["nargs"] = nargs
            if "default" in a:
                kw["default"] = a.pop("default")
                kw.setdefault("nargs", "?")
            kw.pop("required", None)
            parser.add_argument(dest.replace("-", "_"), **kw)
            return
        pairs = [n.split("/", 1) for n in names if "/" in n]  # --shout/--no-shout
        flags = [n for n in names if "/" not in n]
        dest = (dests[0] if dests else max(flags + [p[0] for p in pairs], key=len).lstrip("-")).replace("-", "_")
        default = a.pop("default", None)
        if pairs:
            on, off = pairs[0]
            parser.add_argument(on, *flags, dest=dest, action="store_true", default=bool(default), **kw)
            parser.add_argument(off, dest=dest, action="store_false", help=argparse.SUPPRESS)
            return
        if a.pop("is_flag", False) or typ is bool:
            parser.add_argument(*flags, dest=dest, action="store_true", default=bool(default), **kw)
        elif a.pop("count", False):
            parser.add_argument(*flags, dest=dest, action="count", default=default or 0, **kw)
        elif a.pop("multiple", False):
            parser.add_argument(*flags, dest=dest, action="append", default=list(default or ()), **kw)
        else:
            nargs = a.pop("nargs", None)
            if isinstance(nargs, int) and nargs > 1:
                kw["nargs"] = nargs
            parser.add_argument(*flags, dest=dest, default=default, **kw)


def option(*decls: str, **attrs: Any) -> Param:
    """Faust's ``faust.cli.option`` (a click option): ``option('--limit', type=int, default=10)``."""
    return Param("option", decls, attrs)


def argument(*decls: str, **attrs: Any) -> Param:
    """Faust's ``faust.cli.argument`` (a click argument): ``argument('word')``."""
    return Param("argument", decls, attrs)


class AppCommand:
    """What a command's ``self`` is: the app plus Faust's output helpers."""

    def __init__(self, app: "App", name: str) -> None:
        self.app = app
        self.name = name

    def say(self, message: Any = "", *, file: Any = None, err: bool = False, **kwargs: Any) -> None:
        print(message, file=file or (sys.stderr if err else sys.stdout))

    def carp(self, message: Any, **kwargs: Any) -> None:
        print(message, file=sys.stderr)

    def abort(self, message: str = "", code: int = 1) -> None:
        if message:
            self.carp(message)
        raise SystemExit(code)


Command = AppCommand


class CommandSpec:
    """A registered command: the function, its declarations and its help text."""

    def __init__(self, fun: Callable[..., Any], params: tuple[Param, ...], name: str, help: str | None) -> None:
        self.fun = fun
        self.params = params
        self.name = name
        doc = (fun.__doc__ or "").strip().splitlines()
        self.help = help or (doc[0] if doc else "")
        sig = inspect.signature(fun).parameters
        declared = {_dest(p) for p in params}
        positional = [n for n, p in sig.items() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        # Faust passes the command object when the function takes a parameter its options don't fill.
        self.takes_self = bool(positional) and positional[0] not in declared

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fun(*args, **kwargs)


def _dest(p: Param) -> str:
    dests = [d for d in p.decls if not d.startswith("-")]
    if dests:
        return dests[0].replace("-", "_")
    names = [d.split("/", 1)[0] for d in p.decls]
    return max(names, key=len).lstrip("-").replace("-", "_")


def register(app: "App", params: tuple[Param, ...], name: str | None, help: str | None) -> Callable[[Any], Any]:
    def _decorate(fun: Callable[..., Any]) -> Callable[..., Any]:
        cmd_name = str(name or getattr(fun, "__name__", "command")).replace("_", "-")
        app.commands[cmd_name] = CommandSpec(fun, params, cmd_name, help)
        return fun

    return _decorate


def add_parsers(sub: Any, app: "App", builtin: set[str]) -> None:
    """Add the app's commands to the CLI's subparsers (built-in names win)."""
    for name, spec in app.commands.items():
        if name in builtin:
            continue
        p = sub.add_parser(name, help=spec.help, description=spec.help)
        for param in spec.params:
            param.add_to(p)


def run_command(app: "App", name: str, args: argparse.Namespace) -> int:
    """Call the command with its parsed options; ``async`` commands run on an event loop."""
    spec: CommandSpec = app.commands[name]
    kwargs = {_dest(p): getattr(args, _dest(p)) for p in spec.params}
    call_args = (AppCommand(app, name),) if spec.takes_self else ()
    result = spec.fun(*call_args, **kwargs)
    if inspect.isawaitable(result):
        async def _go() -> Any:
            try:
                return await result
            finally:
                await app.stop_clients()

        result = asyncio.run(_go())
    return result if isinstance(result, int) and not isinstance(result, bool) else 0


# -- built-in Faust verbs whose logic lives here (cli.py only wires them) -------------------------------------
def app_models(app: "App") -> list[type]:
    """The Record models the app's modules define (agentstream's own excluded)."""
    from .models import registry

    return [m for ns, m in sorted(registry.items()) if not m.__module__.startswith("agentstream.")]


def print_models(app: "App") -> int:
    """``agentstream -A app models``: namespace and first docstring line of every model."""
    models = app_models(app)
    if not models:
        print("(no models)")
    for m in models:
        doc = (m.__doc__ or "").strip().splitlines()
        print(f"{m._options.namespace}\t{doc[0] if doc and not doc[0].startswith(m.__name__ + '(') else ''}")  # type: ignore[attr-defined]
    return 0


def print_model(app: "App", name: str) -> int:
    """``agentstream -A app model NAME``: the model's fields with their types and defaults."""
    import dataclasses
    import typing

    models = app_models(app)
    found = [m for m in models if name in (m._options.namespace, m.__name__, m.__qualname__)]  # type: ignore[attr-defined]
    if not found:
        names = ", ".join(m.__name__ for m in models) or "(none)"
        print(f"agentstream: error: no model named {name!r} (models: {names})", file=sys.stderr)
        return 2
    model = found[0]
    try:
        hints = typing.get_type_hints(model)
    except Exception:  # forward references that do not resolve: show the raw annotations
        hints = {}
    print(f"{model._options.namespace}")  # type: ignore[attr-defined]
    for f in dataclasses.fields(model):
        tp = hints.get(f.name, f.type)
        type_name = tp.__name__ if isinstance(tp, type) else str(tp).replace("typing.", "")
        if f.default is not dataclasses.MISSING:
            default = repr(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            default = f"{getattr(f.default_factory, '__name__', 'factory')}()"
        else:
            default = "*"
        print(f"  {f.name}\t{type_name}\tdefault={default}")
    return 0


def reset_app(app: "App", *, offsets: bool, yes: bool) -> int:
    """``agentstream -A app reset``: delete this app's local table stores (they restore from the
    changelogs on the next start, as in Faust); with ``--offsets`` also rewind the consumer group to
    the earliest offsets of the app's source topics. Refuses without ``--yes`` (prints the plan)."""
    import shutil

    from .transport.base import TP

    root = app.settings.data_dir / app.id / "tables"
    print(f"local table stores: {root}{'' if root.exists() else ' (none)'}")
    topics: list[str] = []
    if offsets:
        async def _sources() -> list[str]:
            await app.discover()
            return sorted(app.topology().source_topics)

        topics = asyncio.run(_sources())
        print(f"consumer group {app.id!r}: rewind {', '.join(topics) or '(no source topics)'} to the earliest offset")
        if app.tables:
            print("note: tables are restored from their changelogs, so re-processed records are counted again "
                  "on top; delete the changelog topics too for a clean re-run")
    if not yes:
        print("nothing done: pass --yes to do it (stop every worker of the app first)")
        return 1
    if root.exists():
        shutil.rmtree(root)
        print(f"deleted {root}")
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
                await app.stop_clients()

        asyncio.run(_rewind())
        print(f"rewound group {app.id!r} on {len(topics)} topics (offset 0 = the earliest still kept)")
    return 0
