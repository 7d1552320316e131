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
