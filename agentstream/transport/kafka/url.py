"""``kafka://`` URLs -> aiokafka's bootstrap list, with errors that show the accepted form."""

from __future__ import annotations

from urllib.parse import urlsplit

from ...exceptions import ConfigError

__all__ = ["parse_kafka_url", "DEFAULT_PORT"]

_URL_FIX = "use kafka://host:port, several brokers separated by ';' or ',' (e.g. kafka://127.0.0.1:9092)"
DEFAULT_PORT = 9092


def parse_kafka_url(url: str) -> list[str]:
    """``kafka://h1:p1;h2:p2`` (or ``,``-separated) -> ``["h1:p1", "h2:p2"]``; port defaults to 9092."""
    if not isinstance(url, str) or "://" not in url:
        raise ConfigError("broker", f"{url!r} is not a broker URL", _URL_FIX)
    scheme, _, rest = url.partition("://")
    if scheme.lower() != "kafka":
        raise ConfigError("broker", f"{url!r} does not use the kafka:// scheme", _URL_FIX)
    hosts: list[str] = []
    for part in rest.replace(",", ";").split(";"):
        part = part.strip()
        if part.lower().startswith("kafka://"):  # Faust's kafka://h1:p1;kafka://h2:p2: each part may carry it
            part = part[len("kafka://") :]
        part = part.rstrip("/")
        if not part:
            continue
        if any(c in part for c in "/?#@") or "://" in part:
            raise ConfigError("broker", f"{part!r} in {url!r} is not a host:port pair", _URL_FIX)
        try:
            split = urlsplit(f"//{part}")
            host, port = split.hostname, split.port
        except ValueError as exc:
            raise ConfigError("broker", f"bad host:port {part!r} in {url!r} ({exc})", _URL_FIX) from exc
        if not host:
            raise ConfigError("broker", f"missing host in {part!r} of {url!r}", _URL_FIX)
        if ":" in host:  # IPv6 literal
            host = f"[{host}]"
        hosts.append(f"{host}:{port if port is not None else DEFAULT_PORT}")
    if not hosts:
        raise ConfigError("broker", f"{url!r} names no broker host", _URL_FIX)
    return hosts
