"""``faust.cli``: Faust's command classes and helpers for app-defined CLI commands.

Three ways to add a command, as in Faust, each run as ``agentstream -A module <name> [options]``:

- ``@app.command(option(...))`` on a function (its ``self``, when it takes one, has ``app``/``say``);
- ``@app.command(option(...), base=MyBase)``: the function becomes ``run`` of a new subclass of
  ``MyBase`` (an :class:`AppCommand` subclass declared with ``abstract = True``), so its ``self``
  has the base's methods;
- ``class Report(AppCommand): options = [option(...)]; async def run(self, ...)``: defining the
  class adds the command ``report`` (the class name, lower-case, ``_`` -> ``-``); a class that
  declares ``abstract = True`` is a base and adds none.

``run`` may be ``async`` (run on an event loop; an :class:`AppCommand` stops the app's clients
afterwards) or a plain method; a command that overrides ``__call__`` runs that instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import io
import json
import sys
from collections.abc import Callable, Sequence
from typing import IO, Any, ClassVar

import click

from agentstream import codecs
from agentstream.app_loader import load_app
from agentstream.cli import State, main
from agentstream.commands import argument, option, registered, then_stop_clients

__all__ = ["AppCommand", "Command", "argument", "call_command", "main", "option"]


def _params(options: Sequence[Any]) -> list[click.Parameter]:
    """The click parameters that ``option(...)``/``argument(...)`` decorators declare, in order."""

    def probe() -> None:
        pass

    for deco in reversed(list(options)):
        deco(probe)
    return list(reversed(getattr(probe, "__click_params__", [])))


def _command_name(cls: type) -> str:
    return str(cls.__dict__.get("name") or cls.__name__).lower().replace("_", "-")


class Command:
    """Base class of a CLI command (Faust's ``faust.cli.Command``): override ``run``.

    ``options`` lists its ``option(...)``/``argument(...)`` declarations; the values reach ``run``
    as keyword arguments. ``say``/``carp``/``tabulate``/``dumps`` write output as Faust's do.
    """

    abstract: ClassVar[bool] = True
    options: ClassVar[Sequence[Any] | None] = None
    UsageError: ClassVar[type[Exception]] = click.UsageError
    _click: ClassVar[click.Command | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("abstract", False):
            return  # a base for other commands: adds no command itself
        cls._click = cls.as_click_command()
        registered[cls._click.name or _command_name(cls)] = cls._click

    @classmethod
    def as_click_command(cls) -> click.Command:
        """The click command that builds this class with the parsed options and calls it."""

        def callback(**kwargs: Any) -> int:
            return cls(click.get_current_context(), **kwargs)()

        doc = inspect.cleandoc(cls.__doc__) if cls.__doc__ else None
        return click.Command(_command_name(cls), callback=callback, params=_params(cls.options or ()), help=doc)

    def __init__(self, ctx: click.Context | None = None, *args: Any, **kwargs: Any) -> None:
        self.ctx = ctx
        self.args = args
        self.kwargs = kwargs
        root = ctx.find_root() if ctx is not None else None
        self.state: State = root.ensure_object(State) if root is not None else State()
        self.prog_name = root.command_path if root is not None else "agentstream"
        self.stdout: IO[str] = sys.stdout
        self.stderr: IO[str] = sys.stderr
        # Faust's options before the sub-command (agentstream.cli's group): what its Command reads
        self.debug = bool(getattr(self.state, "debug", False))
        self.quiet = bool(getattr(self.state, "quiet", False))
        self.json = bool(getattr(self.state, "json", False))
        self.workdir: str | None = getattr(self.state, "workdir", None)
        datadir = getattr(self.state, "datadir", None)
        self.datadir: str | None = None if datadir is None else str(datadir)
        self.logfile: str | None = getattr(self.state, "logfile", None)
        self.loglevel = self.state.loglevel or "WARNING"

    async def run(self, *args: Any, **kwargs: Any) -> Any:
        """What the command does (override it)."""

    async def execute(self, *args: Any, **kwargs: Any) -> Any:
        """``run``, then ``on_stop`` whatever happened."""
        try:
            result = self.run(*args, **kwargs)
            return await result if inspect.isawaitable(result) else result
        finally:
            await self.on_stop()

    async def on_stop(self) -> None:
        """Called after ``run`` (an :class:`AppCommand` stops the app's clients here)."""

    def __call__(self, *args: Any, **kwargs: Any) -> int:
        """Run the command to its end; returns the exit status (``run``'s int result, else 0)."""
        result = asyncio.run(self._execute(*self.args, *args, **{**self.kwargs, **kwargs}))
        return result if isinstance(result, int) and not isinstance(result, bool) else 0

    async def _execute(self, *args: Any, **kwargs: Any) -> Any:
        return await self.execute(*args, **kwargs)

    # -- output, as Faust's commands write it -------------------------------------------------------------------
    def say(self, message: Any = "", file: IO[str] | None = None, err: Any = None, **kwargs: Any) -> None:
        """Print ``message`` (to ``file``, or stderr with ``err=True``) unless the command is quiet."""
        if not self.quiet:
            click.echo(message, file=file or (self.stderr if err else self.stdout), **kwargs)

    def carp(self, s: Any, **kwargs: Any) -> None:
        """Debug output: printed as ``#-- s`` only when the command's ``debug`` is on (as in Faust)."""
        if self.debug:
            self.say(f"#-- {s}", **kwargs)

    def dumps(self, obj: Any) -> str:
        """``obj`` as JSON text."""
        return json.dumps(obj)

    def tabulate(
        self, data: Sequence[Sequence[Any]], headers: Sequence[str] | None = None, title: str = "", **kwargs: Any
    ) -> str:
        """Rows as an aligned text table (JSON with ``self.json``), for ``self.say``."""
        if self.json:
            return json.dumps([dict(zip(headers, row)) for row in data] if headers else [list(r) for r in data])
        rows = [list(map(str, r)) for r in ([list(headers)] if headers else []) + [list(r) for r in data]]
        widths = [max(len(r[i]) for r in rows if i < len(r)) for i in range(max((len(r) for r in rows), default=0))]
        lines = [title] if title else []
        lines += ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(r)).rstrip() for r in rows]
        return "\n".join(lines)


class AppCommand(Command):
    """A command of an app (Faust's ``faust.cli.AppCommand``): ``self.app`` is the ``-A`` app.

    ``@app.command(..., base=Sub)`` builds a subclass of ``Sub`` from the function
    (:meth:`from_handler`); after ``run`` the app's clients (producer, consumers) are stopped.
    """

    abstract: ClassVar[bool] = True
    require_app: ClassVar[bool] = True

    @classmethod
    def from_handler(
        cls, *options: Any, name: str | None = None, help: str | None = None, **kwargs: Any
    ) -> Callable[[Callable[..., Any]], type[AppCommand]]:
        """``@app.command(..., base=cls)``: a subclass of ``cls`` whose ``run`` is the function."""

        def _inner(fun: Callable[..., Any]) -> type[AppCommand]:
            target: Any = fun if inspect.signature(fun).parameters else staticmethod(fun)
            fields = {
                "run": target,
                "__doc__": help or fun.__doc__,
                "__module__": fun.__module__,
                "__qualname__": fun.__qualname__,
                "__wrapped__": fun,
                "options": options,
                "abstract": False,
                **({"name": name} if name else {}),
            }
            return type(fun.__name__, (cls,), {**fields, **kwargs})

        return _inner

    def __init__(
        self,
        ctx: click.Context | None = None,
        *args: Any,
        app: Any = None,
        key_serializer: Any = None,
        value_serializer: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(ctx, *args, **kwargs)
        self.app = app if app is not None else self.state.app()
        self.key_serializer = key_serializer or self.app.key_serializer
        self.value_serializer = value_serializer or self.app.value_serializer

    async def _execute(self, *args: Any, **kwargs: Any) -> Any:
        return await then_stop_clients(self.app, self.execute(*args, **kwargs))

    # -- Faust's helpers for turning command-line text into keys, values, models and topics -------------------
    def to_key(self, typ: str | None, key: str) -> Any:
        """``key`` decoded as the model named ``typ`` with the key serializer (bytes without a type)."""
        return self.to_model(typ, key, self.key_serializer)

    def to_value(self, typ: str | None, value: str) -> Any:
        """``value`` decoded as the model named ``typ`` with the value serializer (bytes without a type)."""
        return self.to_model(typ, value, self.value_serializer)

    def to_model(self, typ: str | None, value: str, serializer: Any) -> Any:
        data = value.encode() if isinstance(value, str) else value
        if typ:
            return codecs.codec_for(self.import_relative_to_app(typ), serializer).loads(data)
        return data

    def import_relative_to_app(self, attr: str) -> Any:
        """``"module.Name"``, or ``"Name"`` found beside the app (its module, ``<package>.models``)."""
        from importlib import import_module

        module_name, _, name = attr.rpartition(".")
        candidates = [module_name] if module_name else []
        origin = getattr(self.app, "origin", None) or getattr(getattr(self.app, "conf", None), "origin", None)
        if origin:
            root = str(origin).partition(":")[0]
            candidates += [f"{root}.models", root] if not module_name else [f"{root}.{module_name}"]
        for candidate in candidates:
            with contextlib.suppress(ImportError, AttributeError):
                return getattr(import_module(candidate), name)
        raise ImportError(f"cannot import {attr!r} (tried {', '.join(candidates) or 'nothing: no module given'})")

    def to_topic(self, entity: str) -> Any:
        """A topic by name, or an agent by ``@name``."""
        if not entity:
            raise self.UsageError("Missing topic/@agent name")
        if entity.startswith("@"):
            wanted = entity[1:].rpartition(".")[2]
            for agent in self.app.agents.values():
                if agent.name.rpartition(".")[2] == wanted:
                    return agent
            return self.import_relative_to_app(entity[1:])
        return self.app.topic(entity)


def call_command(
    command: str,
    args: Sequence[str] | None = None,
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
    side_effects: bool = False,
    app: Any = None,
    **kwargs: Any,
) -> tuple[int | str | None, IO[str], IO[str]]:
    """Run ``agentstream <command> <args>`` in-process: ``(exit status, stdout, stderr)``."""
    out = stdout if stdout is not None else io.StringIO()
    err = stderr if stderr is not None else io.StringIO()
    argv = [command, *(args or [])]
    if isinstance(app, str):
        app = load_app(app)
    code: int | str | None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv, app=app)
        except SystemExit as exc:
            code = exc.code
    return code, out, err
