"""Faust's ``app.conf``: every setting by Faust's name or agentstream's, read and assigned.

A Faust app reads ``app.conf.datadir`` or ``app.conf.broker_commit_interval`` and assigns
``app.conf.x = ...`` (in an ``on_configured`` receiver, or right after ``App(...)``). Reading gives
the effective value (the agentstream setting a Faust name reaches, or the value given, or Faust's
default for a setting agentstream keeps as given); assigning goes through what ``App(...)`` does at
start (translation, validation, the refusal of :mod:`agentstream.faust_settings`), so a setting
assigned takes effect or is refused exactly as it would have been as an argument.

The :class:`Conf` view holds no state: the app's :class:`~agentstream.settings.Settings` object is
updated in place, so the worker and its parts, which keep a reference to it, see the change.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from . import faust_args, faust_settings
from .faust_settings import FAUST_SETTINGS
from .settings import Settings

__all__ = ["Conf", "effective", "reconfigure"]

_FIELDS = frozenset(f.name for f in dataclasses.fields(Settings))


def effective(app: Any, name: str) -> Any:
    """The value of setting ``name`` (Faust's name or agentstream's) for ``app``."""
    settings: Settings = app.settings
    name = faust_args.ALIASES.get(name, name)
    if name == "name":  # Faust's conf.name: the id as given (conf.id adds -v<version>)
        return app._given[0]
    if name in ("key_serializer", "value_serializer"):
        return getattr(app, name)
    if name in _FIELDS:
        return getattr(settings, name)
    renamed = faust_args.RENAMED.get(name)
    if renamed is not None:
        return getattr(settings, renamed)
    if name == "producer_linger_ms":
        return settings.producer_linger * 1000.0
    if name[:1].isupper() and settings.extra.get(name) is not None and hasattr(app, "class_setting"):
        cls = app.class_setting(name)  # a class setting given as 'module:Class' reads back as the class, as in Faust
        if cls is not None:
            return cls
    if name in settings.extra:
        return settings.extra[name]
    entry = FAUST_SETTINGS.get(name)
    if entry is not None:
        return None if entry.default is faust_settings._UNSET else entry.default
    return getattr(settings, name)  # Settings' methods (table_root(), replace()...), or AttributeError


def reconfigure(app: Any, changes: dict[str, Any]) -> None:
    """Apply ``changes`` (Faust's names or agentstream's) to ``app``'s settings as ``App(...)``
    would at start: translated, validated, refused when agentstream cannot do what they ask. The
    settings object is updated in place; on a ConfigError nothing changes."""
    settings: Settings = app.settings
    translated = faust_args.translate_settings(changes)
    fields = {k: v for k, v in translated.items() if k in _FIELDS and k not in ("id", "extra")}
    extra = {k: v for k, v in translated.items() if k not in _FIELDS}
    if "id" in translated:
        raise AttributeError("app.conf.id cannot be assigned: the id is the App's first argument")
    faust_settings.refuse_unsupported(settings.id, extra)
    if "version" in fields:  # a new version renames the app from the id as given (and its dead letters)
        fields["id"] = app._given[0]
        if settings.dead_letter_topic == f"{settings.id}-dead-letters":
            fields.setdefault("dead_letter_topic", "")
    new = dataclasses.replace(settings, extra={**settings.extra, **extra}, **fields)
    faust_args.log_unknown_settings(settings.id, extra)
    for f in dataclasses.fields(Settings):
        setattr(settings, f.name, getattr(new, f.name))
    for key in ("key_serializer", "value_serializer"):
        if key in translated:
            setattr(app, key, translated[key])


class Conf:
    """``app.conf``: the app's settings by Faust's names and agentstream's (see the module doc)."""

    __slots__ = ("_app",)

    def __init__(self, app: Any) -> None:
        object.__setattr__(self, "_app", app)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return effective(object.__getattribute__(self, "_app"), name)

    def __setattr__(self, name: str, value: Any) -> None:
        reconfigure(object.__getattribute__(self, "_app"), {name: value})

    def __dir__(self) -> list[str]:
        return sorted(_FIELDS | set(FAUST_SETTINGS) | set(faust_args.ALIASES) | {"name"})

    def __eq__(self, other: object) -> bool:
        app = object.__getattribute__(self, "_app")
        if isinstance(other, Conf):
            return bool(app is object.__getattribute__(other, "_app"))
        return bool(app.settings == other)

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"<Conf of {object.__getattribute__(self, '_app').settings.id}>"
