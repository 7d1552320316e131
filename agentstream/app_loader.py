"""Loading the App named by ``-A package.module[:attribute]``: used by the CLI and the Spark exporter
(both shells above the App), so it lives in neither of them."""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from pathlib import Path

from .app import App
from .exceptions import AgentStreamError, ConfigError

__all__ = ["load_app"]


def _where(exc: BaseException) -> str:
    """``file:line: Error: message`` of the app code that raised (one line, no traceback)."""
    if isinstance(exc, SyntaxError):
        return f"{exc.filename}:{exc.lineno}: {type(exc).__name__}: {exc.msg}"
    here = str(Path(__file__).resolve().parent)
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if "importlib" not in f.filename and not f.filename.startswith((here, "<"))
    ]
    at = f"{frames[-1].filename}:{frames[-1].lineno}: " if frames else ""
    if isinstance(exc, AgentStreamError):
        return f"{at}{exc}"
    return f"{at}{type(exc).__name__}: {exc}"


def load_app(spec: str) -> App:
    """``package.module`` or ``package.module:attribute``; the module's ``app`` by default.

    A module that does not import (syntax error, exception at import) is a ConfigError of one line
    naming the file, the line and the error."""
    module_name, _, attr = spec.partition(":")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise ConfigError(
                "app",
                f"cannot import {module_name!r}: {exc}",
                "pass -A package.module[:app] importable from the current directory",
            ) from None
        raise ConfigError(
            "app",
            f"app module {module_name!r} failed to import: {_where(exc)}",
            "install the missing module or fix the import",
        ) from None
    except ConfigError as exc:  # a bad setting in App(...): name the setting, and where it came from
        where = _where(exc).rsplit(": setting ", 1)[0]
        env = f"AGENTSTREAM_{exc.setting.upper()}"
        if env in os.environ:
            where += f" (with {env}={os.environ[env]!r})"
        raise ConfigError(exc.setting, f"{where}: {exc.problem}", exc.fix) from None
    except Exception as exc:  # the app's own code: one line instead of a traceback wall
        raise ConfigError(
            "app",
            f"app module {module_name!r} failed to import: {_where(exc)}",
            "fix the error at that line (python -c 'import MODULE' shows the traceback)",
        ) from None
    if attr:
        obj = getattr(module, attr, None)
    else:
        obj = getattr(module, "app", None)
        if not isinstance(obj, App):
            obj = next((v for v in vars(module).values() if isinstance(v, App)), None)
    if not isinstance(obj, App):
        raise ConfigError("app", f"{spec!r} has no agentstream.App", "pass -A module:attribute naming the App instance")
    return obj
