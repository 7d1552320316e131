"""TLS and SASL for the Kafka clients: settings -> aiokafka keyword arguments, and start-up
failures of authentication or TLS -> one :class:`BrokerAuthError` line that names the setting.

The settings are resolved and checked once (:func:`agentstream.credentials.broker_security`,
called by ``Settings.validate``), so a missing CA file or an unknown mechanism fails before the
worker connects anywhere. This module only maps that description to aiokafka's names. Secrets
reach aiokafka and nothing else: they are never logged and never part of an error message.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

from aiokafka import errors as kafka_errors  # type: ignore[import-untyped,unused-ignore]
from aiokafka.abc import AbstractTokenProvider  # type: ignore[import-untyped,unused-ignore]

from ...credentials import BrokerSecurity, broker_security, reveal
from ...exceptions import ConfigError

__all__ = ["client_security", "security_kwargs", "start_client", "BrokerAuthError", "StaticTokenProvider"]


class BrokerAuthError(ConfigError):
    """The broker refused the credentials or the TLS handshake failed: a configuration problem."""


class StaticTokenProvider(AbstractTokenProvider):  # type: ignore[misc]
    """OAUTHBEARER with a fixed token (``broker_sasl_oauth_token``)."""

    def __init__(self, token: str) -> None:
        self._token = token

    async def token(self) -> str:
        return self._token

    def __repr__(self) -> str:
        return "<StaticTokenProvider token='***'>"


def security_kwargs(sec: BrokerSecurity) -> dict[str, Any]:
    """aiokafka client arguments for ``sec`` (empty for PLAINTEXT: aiokafka's defaults)."""
    if sec.protocol == "PLAINTEXT":
        return {}
    out: dict[str, Any] = {"security_protocol": sec.protocol}
    if sec.ssl_context is not None:
        out["ssl_context"] = sec.ssl_context
    if sec.mechanism is not None:
        out["sasl_mechanism"] = sec.mechanism
    if sec.mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        out["sasl_plain_username"] = sec.username
        out["sasl_plain_password"] = reveal(sec.password)
    elif sec.mechanism == "OAUTHBEARER":
        out["sasl_oauth_token_provider"] = (
            sec.token_provider if sec.token_provider is not None else StaticTokenProvider(reveal(sec.token) or "")
        )
    elif sec.mechanism == "GSSAPI":
        out["sasl_kerberos_service_name"] = sec.kerberos_service_name
        if sec.kerberos_domain_name:
            out["sasl_kerberos_domain_name"] = sec.kerberos_domain_name
    return out


def client_security(settings: Any) -> dict[str, Any]:
    """aiokafka client arguments for an app's settings (``Settings`` or anything with its fields)."""
    return security_kwargs(broker_security(settings))


def _auth_failure(exc: BaseException, security: dict[str, Any]) -> tuple[str, str] | None:
    """``(setting, one-line reason)`` when ``exc`` is an authentication or TLS failure, else None."""
    mechanism = security.get("sasl_mechanism")
    chain: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and len(chain) < 8:
        chain.append(e)
        e = e.__cause__ or e.__context__
    for e in chain:
        if isinstance(e, ssl.SSLCertVerificationError):
            return (
                "broker_ssl_cafile",
                f"the broker's TLS certificate was not accepted ({e.verify_message or e.reason})",
            )
        if isinstance(e, ssl.SSLError):
            return "broker_ssl_certfile", f"the TLS handshake with the broker failed ({e.reason or e})"
        if isinstance(e, (kafka_errors.SaslAuthenticationFailed, kafka_errors.AuthenticationFailedError)):
            return (
                "broker_sasl_password",
                f"the broker refused the SASL {mechanism} login (wrong username or password?)",
            )
        if isinstance(e, kafka_errors.UnsupportedSaslMechanismError):
            return "broker_sasl_mechanism", f"the broker does not offer SASL {mechanism}"
        if isinstance(e, kafka_errors.IllegalSaslStateError):
            return "broker_sasl_mechanism", f"SASL {mechanism} failed ({e})"
        if mechanism and mechanism.startswith("SCRAM") and isinstance(e, (KeyError, ValueError)):
            # aiokafka reads the server's final SCRAM message without checking for "e=...": a
            # rejected proof (wrong password or unknown user) surfaces as KeyError('v').
            return (
                "broker_sasl_password",
                f"the broker rejected the SASL {mechanism} login (wrong username or password?)",
            )
    return None


async def _probe(bootstrap: str, security: dict[str, Any]) -> BaseException | None:
    """Connect once to the first bootstrap host with ``security`` and return what failed.

    aiokafka's bootstrap logs the real cause (TLS verification, SASL error 58) and raises only
    "Unable to bootstrap"; one direct connection recovers the cause for the error message."""
    from aiokafka.conn import create_conn  # type: ignore[import-untyped,unused-ignore]

    host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
    try:
        conn = await asyncio.wait_for(
            create_conn(host.strip("[]"), int(port), request_timeout_ms=10_000, **security), 15
        )
    except asyncio.CancelledError:
        raise
    except BaseException as exc:
        return exc
    conn.close()
    return None


async def start_client(
    start: Callable[[], Awaitable[Any]],
    stop: Callable[[], Awaitable[Any]],
    security: dict[str, Any],
    what: str,
    bootstrap: str,
) -> None:
    """``await start()``; an authentication or TLS failure stops the client and raises
    :class:`BrokerAuthError` (one line, names the settings, never a secret). Other errors pass."""
    try:
        await start()
    except (kafka_errors.KafkaError, ssl.SSLError, KeyError, ValueError, OSError) as exc:
        reason = _auth_failure(exc, security) if security else None
        if reason is None and security and isinstance(exc, kafka_errors.KafkaConnectionError):
            cause = await _probe(bootstrap.removeprefix("kafka://"), security)
            reason = _auth_failure(cause, security) if cause is not None else None
        if reason is None:
            raise
        try:
            await stop()
        except Exception:
            pass
        setting, text = reason
        raise BrokerAuthError(
            setting,
            f"{what} could not connect securely to {bootstrap}: {text}",
            "check the broker_sasl_*/broker_ssl_* settings (or broker_credentials) against the broker's listener",
        ) from None
