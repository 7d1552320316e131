"""How a worker proves to the owner of a key that a forwarded request comes from a worker of the
app, without handing the owner the app's web token.

The owner's address comes from the group metadata, which any member of the consumer group writes:
sending it ``Authorization: Bearer <web_token>`` would give the token to whoever joins the group.
Instead the forwarder sends :data:`FORWARD_AUTH_HEADER` = ``v1:<unix seconds>:<hex HMAC-SHA256>``
keyed by the token over the method, the owner's address (as advertised, which is what the owner
checks against its own), the path with query, and the time. A member that advertises its own
address only ever receives signatures for itself, which it can use nowhere else; a signature is
accepted for :data:`FORWARD_AUTH_WINDOW` seconds either side of the owner's clock.
"""

from __future__ import annotations

import hashlib
import hmac
import time

__all__ = ["FORWARD_AUTH_HEADER", "FORWARD_AUTH_WINDOW", "sign", "verify"]

FORWARD_AUTH_HEADER = "X-Agentstream-Forward-Auth"
FORWARD_AUTH_WINDOW = 60.0
_VERSION = "v1"


def _mac(token: bytes, stamp: str, method: str, address: str, path_qs: str) -> str:
    message = "\n".join((_VERSION, stamp, method.upper(), address, path_qs)).encode("utf-8", "surrogateescape")
    return hmac.new(token, message, hashlib.sha256).hexdigest()


def sign(token: bytes, method: str, address: str, path_qs: str, *, now: float | None = None) -> str:
    """The header value for a request to ``address`` (the owner's advertised ``host:port``)."""
    stamp = str(int(time.time() if now is None else now))
    return f"{_VERSION}:{stamp}:{_mac(token, stamp, method, address, path_qs)}"


def verify(token: bytes, value: str, method: str, address: str, path_qs: str, *, now: float | None = None) -> bool:
    """Whether ``value`` signs this request to this worker (``address``: its own advertised one)."""
    version, _, rest = value.partition(":")
    stamp, _, mac = rest.partition(":")
    if version != _VERSION or not stamp.isdigit() or len(stamp) > 12 or len(mac) != 64:
        return False
    current = time.time() if now is None else now
    if abs(current - int(stamp)) > FORWARD_AUTH_WINDOW:
        return False
    return hmac.compare_digest(mac.encode("ascii", "replace"), _mac(token, stamp, method, address, path_qs).encode())
