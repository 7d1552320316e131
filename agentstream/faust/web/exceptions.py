"""``faust.web.exceptions``: the HTTP errors a view raises (``raise self.NotFound()``)."""

from agentstream.web.exceptions import (
    AuthenticationFailed,
    MethodNotAllowed,
    NotAcceptable,
    NotAuthenticated,
    NotFound,
    ParseError,
    PermissionDenied,
    ServerError,
    ServiceUnavailable,
    Throttled,
    UnsupportedMediaType,
    WebError,
    WebValidationError,
)

ValidationError = WebValidationError

__all__ = [
    "WebError",
    "ServerError",
    "ValidationError",
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
