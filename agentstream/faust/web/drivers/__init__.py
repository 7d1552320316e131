"""``faust.web.drivers``: the web server drivers by name, as the ``web`` setting's URL scheme
names them. agentstream has one, ``aiohttp`` (:class:`agentstream.web.Web`); a URL of any other
scheme is refused, here and by the ``web`` setting at ``App(...)``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from agentstream.web import Web

__all__ = ["DRIVERS", "by_name", "by_url"]

DRIVERS: Mapping[str, type[Web]] = {"aiohttp": Web}


def by_name(name: str) -> type[Web]:
    """The driver called ``name`` (``'aiohttp'``); :class:`ModuleNotFoundError` naming the choices
    otherwise (Faust's error)."""
    try:
        return DRIVERS[name]
    except KeyError:
        raise ModuleNotFoundError(
            f"{name!r} is not a valid web driver. Available choices: {', '.join(DRIVERS)}"
        ) from None


def by_url(url: Any) -> type[Web]:
    """The driver a URL's scheme names (``aiohttp://`` -> aiohttp)."""
    return by_name(urlsplit(str(url)).scheme)
