"""Faust's web errors (``faust.web.exceptions``): raise one from a view (``raise self.NotFound()``)
and the client gets its status with ``{"error": detail, **extra}``, as Faust answers.

``detail`` replaces the class's message; ``code=`` its status; other keyword arguments go into the
body. Faust has no ``BadRequest``: its 400s are ``ValidationError`` (:class:`WebValidationError`
here) and :class:`ParseError`."""

from __future__ import annotations

import http
from typing import Any

from ..exceptions import AgentStreamError

__all__ = [
    "WebError",
    "ServerError",
    "WebValidationError",
    "ParseError",
    "AuthenticationFailed",
    "NotAuthenticated",
    "PermissionDenied",
    "NotFound",
    "MethodNotAllowed",
    "NotAcceptable",
    "UnsupportedMediaType",
    "Throttled",
    "ServiceUnavailable",
]


class WebError(AgentStreamError):
    """An HTTP error a view raises: :attr:`code` (the status), :attr:`detail` (the message) and
    :attr:`extra_context` (more keys of the JSON body)."""

    code: int = http.HTTPStatus.INTERNAL_SERVER_ERROR
    detail: str = "Internal server error."

    def __init__(self, detail: str | None = None, *, code: int | None = None, **extra_context: Any) -> None:
        if detail:
            self.detail = detail
        if code:
            self.code = code
        self.extra_context = extra_context
        super().__init__(self.detail)


class ServerError(WebError):
    """500."""

    code = http.HTTPStatus.INTERNAL_SERVER_ERROR
    detail = "Internal server error."


class WebValidationError(WebError):
    """400: invalid input in the request (Faust's ``faust.web.exceptions.ValidationError``, named apart
    from the Record :class:`~agentstream.exceptions.ValidationError`; ``View.ValidationError`` is this)."""

    code = http.HTTPStatus.BAD_REQUEST
    detail = "Invalid input."


class ParseError(WebError):
    """400: a malformed request."""

    code = http.HTTPStatus.BAD_REQUEST
    detail = "Malformed request."


class AuthenticationFailed(WebError):
    """401: wrong credentials."""

    code = http.HTTPStatus.UNAUTHORIZED
    detail = "Incorrect authentication credentials"


class NotAuthenticated(WebError):
    """401: no credentials."""

    code = http.HTTPStatus.UNAUTHORIZED
    detail = "Authentication credentials were not provided."


class PermissionDenied(WebError):
    """403."""

    code = http.HTTPStatus.FORBIDDEN
    detail = "You do not have permission to perform this action."


class NotFound(WebError):
    """404."""

    code = http.HTTPStatus.NOT_FOUND
    detail = "Not found."


class MethodNotAllowed(WebError):
    """405."""

    code = http.HTTPStatus.METHOD_NOT_ALLOWED
    detail = "Method not allowed."


class NotAcceptable(WebError):
    """406."""

    code = http.HTTPStatus.NOT_ACCEPTABLE
    detail = "Could not satisfy the request Accept header."


class UnsupportedMediaType(WebError):
    """415."""

    code = http.HTTPStatus.UNSUPPORTED_MEDIA_TYPE
    detail = "Unsupported media type in request."


class Throttled(WebError):
    """429."""

    code = http.HTTPStatus.TOO_MANY_REQUESTS
    detail = "Request was throttled."


class ServiceUnavailable(WebError):
    """503."""

    code = http.HTTPStatus.SERVICE_UNAVAILABLE
    detail = "Service unavailable. Try again later."
