"""Broker credentials with Faust's names and shapes: ``SSLCredentials``, ``SASLCredentials``,
``GSSAPICredentials`` and ``OAuthCredentials``, passed as ``App(..., broker_credentials=...)``.

They only describe what to present to the broker; :mod:`agentstream.transport.kafka.security`
turns them into client arguments. Secrets never appear in a repr, a log line or an error
message: :class:`Secret` holds them and prints as ``'***'``.
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .exceptions import ConfigError

__all__ = [
    "Secret",
    "Credentials",
    "SSLCredentials",
    "SASLCredentials",
    "GSSAPICredentials",
    "OAuthCredentials",
    "SASL_MECHANISMS",
    "BrokerSecurity",
    "broker_security",
    "build_ssl_context",
]

SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI")


class Secret(str):
    """A string that is redacted in ``repr()``/``str()`` formatting; :meth:`reveal` gives the value."""

    __slots__ = ()

    def reveal(self) -> str:
        return str.__str__(self)

    def __repr__(self) -> str:
        return "'***'" if self else "''"

    def __str__(self) -> str:
        return "***" if self else ""

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


def reveal(value: str | None) -> str | None:
    """The clear text of a (possibly :class:`Secret`) string."""
    if value is None:
        return None
    return value.reveal() if isinstance(value, Secret) else str(value)


class Credentials:
    """Base class of broker credentials (``broker_credentials=`` accepts any subclass)."""

    ssl_context: ssl.SSLContext | None = None

    @property
    def protocol(self) -> str:
        """aiokafka's ``security_protocol`` for these credentials."""
        return "SASL_SSL" if self.ssl_context is not None else "SASL_PLAINTEXT"

    def _fields(self) -> dict[str, Any]:
        return {}

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self._fields().items())
        return f"<{type(self).__name__}: {fields}>"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.__dict__ == self.__dict__

    __hash__ = None  # type: ignore[assignment]


class SSLCredentials(Credentials):
    """TLS to the broker: a CA bundle to verify it, and optionally a client certificate (mTLS).

    Either give files (``cafile``, ``certfile``, ``keyfile``, ``password`` of the key) or a ready
    ``ssl.SSLContext`` (``SSLCredentials(context)``), as in Faust.
    """

    @property
    def protocol(self) -> str:
        return "SSL"

    def __init__(
        self,
        context: ssl.SSLContext | None = None,
        *,
        purpose: Any = None,
        cafile: str | Path | None = None,
        capath: str | Path | None = None,
        cadata: str | None = None,
        certfile: str | Path | None = None,
        keyfile: str | Path | None = None,
        password: str | None = None,
        check_hostname: bool = True,
    ) -> None:
        if purpose is not None and purpose != ssl.Purpose.SERVER_AUTH:
            # Faust's purpose=: these credentials make a Kafka client's context, which verifies the server
            raise TypeError(
                f"SSLCredentials(purpose={purpose!r}): a Kafka client's context has purpose ssl.Purpose.SERVER_AUTH "
                "(it verifies the broker); CLIENT_AUTH makes a server's context, which cannot connect to a broker"
            )
        if context is not None and not isinstance(context, ssl.SSLContext):
            raise TypeError(f"SSLCredentials(context) takes an ssl.SSLContext, got {type(context).__name__}")
        self.ssl_context = context
        self.cafile = None if cafile is None else str(cafile)
        self.capath = None if capath is None else str(capath)
        self.cadata = cadata
        self.certfile = None if certfile is None else str(certfile)
        self.keyfile = None if keyfile is None else str(keyfile)
        self.password = None if password is None else Secret(reveal(password))
        self.check_hostname = check_hostname

    def _fields(self) -> dict[str, Any]:
        return {
            "cafile": self.cafile,
            "certfile": self.certfile,
            "keyfile": self.keyfile,
            "password": self.password,
            "context": self.ssl_context,
        }


class SASLCredentials(Credentials):
    """SASL username/password (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), over TLS when ``ssl_context``
    is given (SASL_SSL) or in the clear otherwise (SASL_PLAINTEXT, for trusted networks only)."""

    def __init__(
        self, *, username: str, password: str, mechanism: Any = "PLAIN", ssl_context: ssl.SSLContext | None = None
    ) -> None:
        self.username = str(username)
        self.password = Secret(reveal(password) or "")
        mechanism = getattr(mechanism, "value", mechanism) or "PLAIN"  # Faust's SASLMechanism enum too
        self.mechanism = str(mechanism).upper().replace("_", "-")
        self.ssl_context = ssl_context

    def _fields(self) -> dict[str, Any]:
        return {
            "mechanism": self.mechanism,
            "username": self.username,
            "password": self.password,
            "ssl_context": self.ssl_context,
        }


class GSSAPICredentials(Credentials):
    """Kerberos (SASL GSSAPI); needs the ``gssapi`` package and a ticket (``kinit``)."""

    mechanism = "GSSAPI"

    def __init__(
        self,
        *,
        kerberos_service_name: str = "kafka",
        kerberos_domain_name: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.kerberos_service_name = kerberos_service_name
        self.kerberos_domain_name = kerberos_domain_name
        self.ssl_context = ssl_context

    def _fields(self) -> dict[str, Any]:
        return {
            "kerberos_service_name": self.kerberos_service_name,
            "kerberos_domain_name": self.kerberos_domain_name,
            "ssl_context": self.ssl_context,
        }


class OAuthCredentials(Credentials):
    """SASL OAUTHBEARER: ``token_provider`` is an aiokafka ``AbstractTokenProvider`` (an object with
    ``async def token() -> str``), or give a fixed ``token`` string."""

    mechanism = "OAUTHBEARER"

    def __init__(
        self, token_provider: Any = None, *, token: str | None = None, ssl_context: ssl.SSLContext | None = None
    ) -> None:
        if (token_provider is None) == (token is None):
            raise TypeError("OAuthCredentials takes either a token_provider or a token")
        self.token_provider = token_provider
        self.token = None if token is None else Secret(reveal(token))
        self.ssl_context = ssl_context

    def _fields(self) -> dict[str, Any]:
        return {"token_provider": self.token_provider, "token": self.token, "ssl_context": self.ssl_context}


# -- from settings to one description of the connection's security -------------------------------------


@dataclass(frozen=True)
class BrokerSecurity:
    """What a broker connection presents, resolved from the settings (client-library neutral)."""

    protocol: str = "PLAINTEXT"  # PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
    ssl_context: ssl.SSLContext | None = None
    mechanism: str | None = None
    username: str | None = None
    password: Secret | None = field(default=None, repr=False)
    token_provider: Any = None
    token: Secret | None = field(default=None, repr=False)
    kerberos_service_name: str = "kafka"
    kerberos_domain_name: str | None = None


class _Settings(Protocol):
    broker_credentials: Any
    ssl_context: Any
    broker_ssl: bool
    broker_ssl_cafile: str
    broker_ssl_certfile: str
    broker_ssl_keyfile: str
    broker_ssl_check_hostname: bool
    broker_sasl_mechanism: str
    broker_sasl_username: str
    broker_sasl_password: str
    broker_sasl_oauth_token: str


def build_ssl_context(
    *,
    cafile: str | None,
    certfile: str | None,
    keyfile: str | None,
    password: str | None = None,
    check_hostname: bool = True,
    capath: str | None = None,
    cadata: str | None = None,
    names: tuple[str, str, str] = ("broker_ssl_cafile", "broker_ssl_certfile", "broker_ssl_keyfile"),
) -> ssl.SSLContext:
    """A client TLS context (TLS 1.2+, certificate verification on); files are checked here so a
    missing or unreadable one fails at start with the setting's name, not at the first connect."""
    for name, path in zip(names, (cafile, certfile, keyfile)):
        if path and not os.access(path, os.R_OK):
            raise ConfigError(name, f"cannot read {path!r}", f"point {name} to a readable PEM file")
    if keyfile and not certfile:
        raise ConfigError(
            names[1],
            "a client key was given without its certificate",
            f"set {names[1]} to the PEM certificate that goes with {names[2]}",
        )
    try:
        ctx = ssl.create_default_context(
            ssl.Purpose.SERVER_AUTH, cafile=cafile or None, capath=capath or None, cadata=cadata or None
        )
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(
            names[0],
            f"{cafile!r} holds no usable CA certificate ({exc})",
            f"point {names[0]} to the PEM file of the CA that signed the broker's certificate",
        ) from None
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = check_hostname
    if certfile:
        try:
            ctx.load_cert_chain(certfile, keyfile or None, password=reveal(password))
        except (ssl.SSLError, OSError) as exc:
            raise ConfigError(
                names[1],
                f"cannot load the client certificate {certfile!r} / key {keyfile!r} ({exc})",
                f"set {names[1]} and {names[2]} to a PEM certificate and its private key",
            ) from None
    return ctx


def broker_security(s: _Settings) -> BrokerSecurity:
    """Resolve ``broker_credentials``, ``ssl_context`` and the ``broker_ssl_*``/``broker_sasl_*``
    settings into one :class:`BrokerSecurity`; ConfigError names the setting that is wrong."""
    creds = s.broker_credentials
    flat_sasl = bool(
        s.broker_sasl_mechanism or s.broker_sasl_username or s.broker_sasl_password or s.broker_sasl_oauth_token
    )
    flat_ssl = bool(s.broker_ssl or s.broker_ssl_cafile or s.broker_ssl_certfile or s.broker_ssl_keyfile)
    if s.ssl_context is not None and not isinstance(s.ssl_context, ssl.SSLContext):
        raise ConfigError(
            "ssl_context",
            f"must be an ssl.SSLContext, got {type(s.ssl_context).__name__}",
            "pass ssl.create_default_context(cafile=...) or use the broker_ssl_* settings",
        )
    if creds is not None and not isinstance(creds, Credentials):
        raise ConfigError(
            "broker_credentials",
            f"must be a credentials object, got {type(creds).__name__}",
            "pass SSLCredentials(...), SASLCredentials(...), GSSAPICredentials(...) or OAuthCredentials(...)",
        )
    if creds is not None and (flat_sasl or (flat_ssl and not isinstance(creds, SASLCredentials | OAuthCredentials))):
        raise ConfigError(
            "broker_credentials",
            "given together with broker_ssl_*/broker_sasl_* settings",
            "use either the credentials object or the flat settings, not both",
        )
    # TLS: an explicit context wins, then the credentials' context or files, then the flat files
    context: ssl.SSLContext | None = s.ssl_context
    if context is None and creds is not None and creds.ssl_context is not None:
        context = creds.ssl_context
    if context is None and isinstance(creds, SSLCredentials):
        names = ("broker_credentials",) * 3
        context = build_ssl_context(
            cafile=creds.cafile,
            certfile=creds.certfile,
            keyfile=creds.keyfile,
            password=creds.password,
            check_hostname=creds.check_hostname,
            names=names,
            capath=creds.capath,
            cadata=creds.cadata,
        )
    if context is None and flat_ssl:
        context = build_ssl_context(
            cafile=s.broker_ssl_cafile or None,
            certfile=s.broker_ssl_certfile or None,
            keyfile=s.broker_ssl_keyfile or None,
            check_hostname=s.broker_ssl_check_hostname,
        )
    tls = context is not None
    if isinstance(creds, SASLCredentials):
        mechanism, username, password = creds.mechanism, creds.username, creds.password
        token_provider, token, setting = None, None, "broker_credentials"
    elif isinstance(creds, OAuthCredentials):
        mechanism, username, password = "OAUTHBEARER", None, None
        token_provider, token, setting = creds.token_provider, creds.token, "broker_credentials"
    elif isinstance(creds, GSSAPICredentials):
        return BrokerSecurity(
            "SASL_SSL" if tls else "SASL_PLAINTEXT",
            context,
            "GSSAPI",
            kerberos_service_name=creds.kerberos_service_name,
            kerberos_domain_name=creds.kerberos_domain_name,
        )
    elif flat_sasl:
        mechanism = s.broker_sasl_mechanism.upper().replace("_", "-")
        username, password = s.broker_sasl_username or None, Secret(reveal(s.broker_sasl_password) or "") or None
        token = Secret(reveal(s.broker_sasl_oauth_token) or "") or None
        token_provider, setting = None, "broker_sasl_mechanism"
    else:
        return BrokerSecurity("SSL" if tls else "PLAINTEXT", context)
    if mechanism not in SASL_MECHANISMS:
        raise ConfigError(setting, f"unknown SASL mechanism {mechanism!r}", f"use one of {', '.join(SASL_MECHANISMS)}")
    if mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        if not username:
            raise ConfigError(
                "broker_sasl_username" if setting != "broker_credentials" else setting,
                f"SASL {mechanism} needs a username",
                "set broker_sasl_username (AGENTSTREAM_BROKER_SASL_USERNAME)",
            )
        if not password:
            raise ConfigError(
                "broker_sasl_password" if setting != "broker_credentials" else setting,
                f"SASL {mechanism} needs a password",
                "set broker_sasl_password (AGENTSTREAM_BROKER_SASL_PASSWORD)",
            )
    if mechanism == "OAUTHBEARER" and token_provider is None and not token:
        raise ConfigError(
            "broker_sasl_oauth_token",
            "SASL OAUTHBEARER needs a token",
            "set broker_sasl_oauth_token, or pass broker_credentials=OAuthCredentials(token_provider)",
        )
    if mechanism == "GSSAPI":
        return BrokerSecurity("SASL_SSL" if tls else "SASL_PLAINTEXT", context, "GSSAPI")
    return BrokerSecurity(
        "SASL_SSL" if tls else "SASL_PLAINTEXT", context, mechanism, username, password, token_provider, token
    )
