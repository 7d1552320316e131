"""Every way a Faust app names its brokers, turned into one URL: ``kafka://h1:p1;h2:p2``.

Faust takes ``broker=`` as a string (``kafka://h1:9092;h2:9092``, each part with or without its own
``kafka://``, ``;`` or ``,`` between them), a list or tuple of such strings or yarl URLs, or bare ``host:port``;
``BROKER_URL`` takes the string forms. agentstream keeps one canonical string in ``Settings.broker`` so the
transport, the exporter and the logs read one form; the transport splits it into the bootstrap list.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .exceptions import ConfigError

__all__ = ["normalize_broker"]

_FIX = (
    "name the brokers as kafka://host:port, several separated by ';' or ',' (kafka://h1:9092;h2:9092), "
    "as a list of such URLs, or use memory:// for the in-process broker"
)


def normalize_broker(value: Any) -> str:
    """One ``scheme://part;part`` string from any accepted form; a mix of schemes or an empty list is refused.

    Only the form is handled here; each ``host:port`` is checked by the transport's URL parser, which names
    the bad part.
    """
    if type(value).__name__ == "URL":  # yarl.URL, as Faust's conf.broker holds them
        value = str(value)
    if isinstance(value, str):
        parts = _split(value)
    elif isinstance(value, Iterable) and not isinstance(value, (bytes, bytearray, dict)):
        parts = []
        for item in value:
            if type(item).__name__ == "URL":
                item = str(item)
            if not isinstance(item, str):
                raise ConfigError("broker", f"{item!r} in the broker list is not a URL string", _FIX)
            parts.extend(_split(item))
    else:
        raise ConfigError("broker", f"must be a URL string or a list of them, got {type(value).__name__}", _FIX)
    if not parts:
        raise ConfigError("broker", f"{value!r} names no broker", _FIX)
    schemes = {scheme for scheme, _ in parts if scheme}
    if len(schemes) > 1:
        raise ConfigError("broker", f"{value!r} mixes the schemes {sorted(schemes)}", _FIX)
    scheme = schemes.pop() if schemes else "kafka"
    return f"{scheme}://" + ";".join(rest for _, rest in parts if rest)


def _split(text: str) -> list[tuple[str, str]]:
    """``"kafka://h1;kafka://h2, h3"`` -> ``[("kafka", "h1"), ("kafka", "h2"), ("", "h3")]``."""
    out: list[tuple[str, str]] = []
    for raw in text.replace(",", ";").split(";"):
        part = raw.strip()
        if not part:
            continue
        scheme, sep, rest = part.partition("://")
        if sep:
            out.append((scheme.lower(), rest.strip().rstrip("/")))
        else:
            out.append(("", part.rstrip("/")))
    return out
