"""``web_ssl_context``: the web server speaks HTTPS with the app's certificate (made here with the
``openssl`` command line), and advertises an https URL."""

from __future__ import annotations

import shutil
import ssl
import subprocess
import uuid
from pathlib import Path

import aiohttp
import pytest

import agentstream
from agentstream.exceptions import ConfigError
from agentstream.testing import AppHarness

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command line")


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 / localhost and its key."""
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=localhost"]
        + ["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    return ctx


def make_app(ctx: ssl.SSLContext) -> agentstream.App:
    app = agentstream.App(f"tls-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1, web_ssl_context=ctx)
    app.topic("src")
    return app


async def test_the_web_server_speaks_https_with_the_given_context(certificate: tuple[Path, Path]) -> None:
    cert, key = certificate
    async with AppHarness(make_app(server_context(cert, key))) as h:
        port = h.web.port
        assert h.web.url == f"https://127.0.0.1:{port}"  # the advertised URL says https
        trusting = ssl.create_default_context(cafile=str(cert))
        async with aiohttp.ClientSession() as s:
            async with s.get(f"https://127.0.0.1:{port}/livez", ssl=trusting) as r:
                assert r.status == 200 and (await r.json())["status"] == "alive"
            with pytest.raises(aiohttp.ClientConnectorCertificateError):  # it is this certificate that is served
                await s.get(f"https://127.0.0.1:{port}/livez", ssl=ssl.create_default_context())
            with pytest.raises(aiohttp.ClientError):  # no plain HTTP on the port
                await s.get(f"http://127.0.0.1:{port}/livez")


def test_a_web_ssl_context_that_is_not_an_ssl_context_is_refused(certificate: tuple[Path, Path]) -> None:
    with pytest.raises(ConfigError) as info:
        agentstream.App("tls", broker="memory://", web_ssl_context=str(certificate[0]))
    assert info.value.setting == "web_ssl_context"


def test_web_ssl_context_is_an_app_argument_only() -> None:
    from agentstream.settings import setting_variables

    assert "AGENTSTREAM_WEB_SSL_CONTEXT" not in setting_variables()
