"""JSON responses shared by every endpoint.

Errors always have the same shape, ``{"error": "...", "hint": "..."}`` plus optional details,
so a client (or a person with curl) gets the cause and the fix instead of an HTML error page.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web
from multidict import CIMultiDict

from ..exceptions import SerializationError
from ..models import json_default, json_dumps

__all__ = ["dumps", "json_response", "error_response", "response_to_bytes", "bytes_to_response"]


def _fallback(obj: Any) -> Any:
    """Last resort for values no codec made JSON-able: their repr, so a lookup never 500s on it."""
    try:
        return json_default(obj)  # Records keep their __faust tag (a bytes key elsewhere got us here)
    except TypeError:
        pass
    asdict = getattr(obj, "asdict", None)
    if callable(asdict):
        return asdict()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj, key=repr)
    if isinstance(obj, bytes):
        return obj.decode("utf-8", "backslashreplace")
    return repr(obj)


def dumps(obj: Any) -> bytes:
    """JSON bytes of ``obj``: the app's JSON encoding (Records, Decimal, sets), else repr()."""
    try:
        return json_dumps(obj)
    except (SerializationError, TypeError):
        return orjson.dumps(obj, default=_fallback, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATACLASS)


def json_response(data: Any, *, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=dumps(data), status=status, content_type="application/json", headers=headers)


def error_response(
    status: int, error: str, hint: str, *, headers: dict[str, str] | None = None, **details: Any
) -> web.Response:
    """``{"error", "hint", **details}`` with ``status``."""
    return json_response({"error": error, "hint": hint, **details}, status=status, headers=headers)


def response_to_bytes(response: web.StreamResponse) -> bytes:
    """A response as the bytes a cache keeps (Faust's ``view.response_to_bytes``): status, headers
    (JSON) and body, newline separated."""
    body = getattr(response, "body", None)
    if body is not None and not isinstance(body, (bytes, bytearray)):
        raise TypeError(f"only responses with a bytes body can be kept, got {type(body).__name__}")
    headers = orjson.dumps([[str(k), v] for k, v in response.headers.items()])
    return b"\n".join([str(response.status).encode(), headers, bytes(body or b"")])


def bytes_to_response(data: bytes) -> web.Response:
    """The response :func:`response_to_bytes` kept (Faust's ``view.bytes_to_response``)."""
    status, _, rest = data.partition(b"\n")
    headers, _, body = rest.partition(b"\n")
    kept = CIMultiDict((str(k), str(v)) for k, v in orjson.loads(headers))
    kept.popall("Content-Length", None)  # the body's own length is set again
    return web.Response(body=body, status=int(status), headers=kept)
