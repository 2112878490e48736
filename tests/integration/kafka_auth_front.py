"""An authenticating front for a plaintext Kafka broker (test infrastructure).

The embedded Tansu cannot let a SASL client in nor serve TLS (docs/kafka.md,
"Authentication"), so the authentication tests put this front before it: Tansu is started
with ``--advertised-listener-url`` set to the front's address, so every client connection
(bootstrap and per broker) comes through here. The front

* terminates TLS when given an ``ssl.SSLContext``;
* with ``sasl=True`` answers SaslHandshake (v1) and SaslAuthenticate (v0-v2) itself with
  PLAIN and SCRAM-SHA-256/512 (RFC 5802, RFC 7677) against its users table, passes
  ApiVersions through to the broker (listing the two SASL requests as the front serves
  them), and closes a connection that sends anything else before authenticating or fails
  to authenticate (answering the failed SaslAuthenticate with error 58 first, and closing
  100 ms later, as Kafka does);
* afterwards copies bytes both ways between the client and the broker.

It enforces no ACL: an authenticated client may do everything the broker allows.
Request layouts follow the Kafka protocol guide (request header v1, and v2 with tagged
fields for flexible versions; ApiVersions answers with response header v0 always).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import os
import shutil
import socket
import ssl
import struct
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path

from streaming.kafka.broker import broker_binary, free_port

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
#: The versions of the SASL requests the front answers (no handshake v0 raw tokens).
SASL_VERSIONS = {SASL_HANDSHAKE: (1, 1), SASL_AUTHENTICATE: (0, 2)}
UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE, SASL_AUTHENTICATION_FAILED = 33, 34, 58
SCRAM_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MECHANISMS = ("PLAIN", *SCRAM_HASHES)
SCRAM_ITERATIONS = 4096
#: Kafka's ``connection.failed.authentication.delay.ms`` default: the connection of a failed
#: login closes this long after its error response (a client reads the response first).
FAILED_AUTHENTICATION_CLOSE_DELAY_S = 0.1


class AuthFailed(Exception):
    """A SASL exchange that does not authenticate; the message goes to the client."""


# -- wire primitives ---------------------------------------------------------------------

def _uvarint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _put_uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _skip_tags(data: bytes, pos: int) -> int:
    count, pos = _uvarint(data, pos)
    for _ in range(count):
        _, pos = _uvarint(data, pos)
        size, pos = _uvarint(data, pos)
        pos += size
    return pos


def _string(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def _compact_string(text: str | None) -> bytes:
    if text is None:
        return b"\x00"
    raw = text.encode()
    return _put_uvarint(len(raw) + 1) + raw


class Request:
    """A request's header fields and where its body starts."""

    def __init__(self, frame: bytes) -> None:
        self.frame = frame
        self.api_key, self.version, self.correlation_id = struct.unpack_from(">hhi", frame)
        (id_len,) = struct.unpack_from(">h", frame, 8)
        self.body = 10 + max(id_len, 0)
        if self.flexible:
            self.body = _skip_tags(frame, self.body)

    @property
    def flexible(self) -> bool:
        """Whether this request uses header v2 (only the versions the front reads)."""
        return (self.api_key == SASL_AUTHENTICATE and self.version >= 2) or (
            self.api_key == API_VERSIONS and self.version >= 3
        )

    def response(self, body: bytes) -> bytes:
        """The size-prefixed response frame of ``body`` (header v1 for a flexible request)."""
        header = struct.pack(">i", self.correlation_id)
        if self.flexible and self.api_key != API_VERSIONS:
            header += b"\x00"
        return struct.pack(">i", len(header) + len(body)) + header + body


async def _read_frame(reader: asyncio.StreamReader) -> bytes | None:
    try:
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        return await reader.readexactly(size)
    except asyncio.IncompleteReadError:
        return None


def with_sasl_versions(response: bytes, version: int) -> bytes:
    """An ApiVersions response (frame without size) listing the front's SASL versions."""
    error_code = struct.unpack_from(">h", response, 4)[0]
    if error_code != 0:
        return response
    pos, entries = 6, []
    if version >= 3:
        count, pos = _uvarint(response, pos)
        count -= 1
    else:
        (count,), pos = struct.unpack_from(">i", response, pos), pos + 4
    for _ in range(count):
        entry = response[pos : pos + 6]
        pos += 6
        if version >= 3:
            pos = _skip_tags(response, pos)
        if struct.unpack_from(">h", entry)[0] not in SASL_VERSIONS:
            entries.append(entry)
    entries += [struct.pack(">hhh", key, *span) for key, span in SASL_VERSIONS.items()]
    if version >= 3:
        listed = _put_uvarint(len(entries) + 1) + b"".join(e + b"\x00" for e in entries)
    else:
        listed = struct.pack(">i", len(entries)) + b"".join(entries)
    return response[:6] + listed + response[pos:]


# -- SASL mechanisms -----------------------------------------------------------------------

class Plain:
    """SASL PLAIN (RFC 4616): one token ``authzid NUL user NUL password``."""

    def __init__(self, users: Mapping[str, str]) -> None:
        self.users = users
        self.user: str | None = None

    def step(self, token: bytes) -> tuple[bytes, bool]:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise AuthFailed("Authentication failed: invalid SASL/PLAIN response")
        authzid, user, password = (p.decode(errors="replace") for p in parts)
        known = self.users.get(user)
        if known is None or not hmac.compare_digest(known.encode(), password.encode()) or authzid not in ("", user):
            raise AuthFailed("Authentication failed: Invalid username or password")
        self.user = user
        return b"", True


def _scram_attributes(text: str) -> dict[str, str]:
    return {part[0]: part[2:] for part in text.split(",") if len(part) > 1 and part[1] == "="}


class Scram:
    """Server side of SCRAM-SHA-256/512 (RFC 5802, RFC 7677): two client messages."""

    def __init__(self, mechanism: str, users: Mapping[str, str]) -> None:
        self.mechanism, self.hash = mechanism, SCRAM_HASHES[mechanism]
        self.users = users
        self.user: str | None = None
        self._state: tuple[str, str, str, str] | None = None  # gs2 header, first bare, server first, user

    def _hmac(self, key: bytes, message: bytes) -> bytes:
        return hmac.new(key, message, self.hash).digest()

    def step(self, token: bytes) -> tuple[bytes, bool]:
        text = token.decode(errors="replace")
        if self._state is None:
            return self._first(text), False
        return self._final(text), True

    def _first(self, text: str) -> bytes:
        parts = text.split(",", 2)
        if len(parts) != 3 or parts[0] not in ("n", "y"):
            raise AuthFailed(f"Authentication failed: invalid {self.mechanism} client-first message")
        attrs = _scram_attributes(parts[2])
        user = attrs.get("n", "").replace("=2C", ",").replace("=3D", "=")
        if user not in self.users or not attrs.get("r"):
            raise AuthFailed(f"Authentication failed during authentication due to invalid credentials with "
                             f"SASL mechanism {self.mechanism}")
        salt = hashlib.sha256(f"{self.mechanism}/{user}".encode()).digest()[:16]
        nonce = attrs["r"] + base64.b64encode(os.urandom(18)).decode()
        server_first = f"r={nonce},s={base64.b64encode(salt).decode()},i={SCRAM_ITERATIONS}"
        self._state = (f"{parts[0]},{parts[1]},", parts[2], server_first, user)
        return server_first.encode()

    def _final(self, text: str) -> bytes:
        assert self._state is not None
        gs2, first_bare, server_first, user = self._state
        attrs = _scram_attributes(text)
        failed = AuthFailed(f"Authentication failed during authentication due to invalid credentials with "
                            f"SASL mechanism {self.mechanism}")
        if ",p=" not in text or attrs.get("r") != _scram_attributes(server_first)["r"]:
            raise failed
        if attrs.get("c") != base64.b64encode(gs2.encode()).decode():
            raise failed
        salt = base64.b64decode(_scram_attributes(server_first)["s"])
        salted = hashlib.pbkdf2_hmac(self.hash, self.users[user].encode(), salt, SCRAM_ITERATIONS)
        client_key = self._hmac(salted, b"Client Key")
        stored_key = hashlib.new(self.hash, client_key).digest()
        auth_message = f"{first_bare},{server_first},{text[: text.rindex(',p=')]}".encode()
        signature = self._hmac(stored_key, auth_message)
        try:
            proof = base64.b64decode(attrs["p"], validate=True)
        except ValueError:
            raise failed from None
        if len(proof) != len(signature):
            raise failed
        recovered = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self.hash, recovered).digest(), stored_key):
            raise failed
        self.user = user
        server_signature = self._hmac(self._hmac(salted, b"Server Key"), auth_message)
        return b"v=" + base64.b64encode(server_signature)


# -- the front -----------------------------------------------------------------------------

class AuthFront:
    """A TCP server on ``127.0.0.1`` relaying authenticated clients to a plaintext broker.

    The port is bound at construction (:attr:`address`, to advertise); :meth:`start` relays
    to the broker.

    Parameters
    ----------
    users : Mapping[str, str]
        User name to password, for PLAIN and SCRAM alike.
    sasl : bool
        Require SASL authentication (``SASL_PLAINTEXT``, or ``SASL_SSL`` with TLS).
    ssl_context : ssl.SSLContext, optional
        Terminate TLS with this server context (``SSL`` or ``SASL_SSL``).
    """

    host = "127.0.0.1"

    def __init__(self, users: Mapping[str, str], sasl: bool = True, ssl_context: ssl.SSLContext | None = None) -> None:
        self.users, self.sasl, self.ssl_context = dict(users), sasl, ssl_context
        self.upstream = ("", 0)
        self.sock = socket.create_server((self.host, 0))
        self.port = int(self.sock.getsockname()[1])
        #: ``(mechanism, user)`` of each authenticated connection; reasons of refused ones.
        self.authenticated: list[tuple[str, str]] = []
        self.refused: list[str] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"auth-front-{self.port}", daemon=True)
        self._server: asyncio.Server | None = None

    @property
    def address(self) -> str:
        """``host:port`` the clients connect to."""
        return f"{self.host}:{self.port}"

    def start(self, upstream: tuple[str, int]) -> AuthFront:
        """Serve, relaying to the plaintext broker at ``upstream``."""
        self.upstream = upstream
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, sock=self.sock, ssl=self.ssl_context), self._loop)
        self._server = future.result(timeout=10)
        return self

    def stop(self) -> None:
        """Close the server and every connection."""

        async def close() -> None:
            if self._server is not None:
                self._server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(timeout=10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        self._loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            return
        try:
            if not self.sasl or await self._authenticate(reader, writer, up_reader, up_writer):
                pipes = [asyncio.create_task(_pipe(reader, up_writer)), asyncio.create_task(_pipe(up_reader, writer))]
                _, pending = await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
                for task in pending:
                    task.cancel()
        except (OSError, ssl.SSLError, asyncio.IncompleteReadError, struct.error, IndexError, ValueError):
            pass  # a broken or malformed connection is closed
        except asyncio.CancelledError:
            pass  # the front stops
        finally:
            for w in (writer, up_writer):
                w.close()
                with suppress(Exception):
                    await w.wait_closed()

    async def _authenticate(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                            up_reader: asyncio.StreamReader, up_writer: asyncio.StreamWriter) -> bool:
        """Run the SASL exchange; ``True`` once the client has authenticated."""
        mechanism: Plain | Scram | None = None
        name = ""
        while True:
            frame = await _read_frame(reader)
            if frame is None:
                return False
            request = Request(frame)
            if request.api_key == API_VERSIONS:
                up_writer.write(struct.pack(">i", len(frame)) + frame)
                await up_writer.drain()
                answer = await _read_frame(up_reader)
                if answer is None:
                    return False
                answer = with_sasl_versions(answer, request.version)
                writer.write(struct.pack(">i", len(answer)) + answer)
            elif request.api_key == SASL_HANDSHAKE and mechanism is None and request.version >= 1:
                (size,) = struct.unpack_from(">h", frame, request.body)
                name = frame[request.body + 2 : request.body + 2 + size].decode(errors="replace")
                offered = struct.pack(">i", len(MECHANISMS)) + b"".join(_string(m) for m in MECHANISMS)
                if name not in MECHANISMS:
                    self.refused.append(f"unsupported mechanism {name}")
                    writer.write(request.response(struct.pack(">h", UNSUPPORTED_SASL_MECHANISM) + offered))
                    await writer.drain()
                    return False
                mechanism = Plain(self.users) if name == "PLAIN" else Scram(name, self.users)
                writer.write(request.response(struct.pack(">h", 0) + offered))
            elif request.api_key == SASL_AUTHENTICATE and mechanism is not None:
                pos = request.body
                if request.flexible:
                    size, pos = _uvarint(frame, pos)
                    size -= 1
                else:
                    (size,), pos = struct.unpack_from(">i", frame, pos), pos + 4
                try:
                    challenge, done = mechanism.step(frame[pos : pos + size])
                except AuthFailed as exc:
                    self.refused.append(f"{name}: {exc}")
                    writer.write(request.response(self._authenticate_body(request, SASL_AUTHENTICATION_FAILED,
                                                                          str(exc), b"")))
                    await writer.drain()
                    await asyncio.sleep(FAILED_AUTHENTICATION_CLOSE_DELAY_S)
                    return False
                writer.write(request.response(self._authenticate_body(request, 0, None, challenge)))
                if done:
                    await writer.drain()
                    assert mechanism.user is not None
                    self.authenticated.append((name, mechanism.user))
                    return True
            else:
                self.refused.append(f"request {request.api_key} v{request.version} before authentication")
                return False
            await writer.drain()

    @staticmethod
    def _authenticate_body(request: Request, error: int, message: str | None, auth: bytes) -> bytes:
        lifetime = struct.pack(">q", 0) if request.version >= 1 else b""
        if request.flexible:
            return (struct.pack(">h", error) + _compact_string(message) + _put_uvarint(len(auth) + 1) + auth
                    + lifetime + b"\x00")
        return struct.pack(">h", error) + _string(message) + struct.pack(">i", len(auth)) + auth + lifetime


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(65536):
        writer.write(data)
        await writer.drain()


# -- helpers of the tests ----------------------------------------------------------------------

def make_certificates(directory: Path) -> tuple[Path, Path, Path]:
    """``(ca.pem, server.pem, server.key)``: a CA and a server certificate for 127.0.0.1 and localhost.

    Needs the ``openssl`` binary (:func:`shutil.which`).
    """
    openssl = shutil.which("openssl")
    assert openssl is not None, "openssl is required"
    ca, ca_key = directory / "ca.pem", directory / "ca.key"
    cert, key, csr, ext = directory / "server.pem", directory / "server.key", directory / "server.csr", directory / "ext"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    for argv in (
        [openssl, "req", "-x509", *ec, "-keyout", ca_key, "-out", ca, "-days", "2", "-subj", "/CN=pubsub test CA"],
        [openssl, "req", *ec, "-keyout", key, "-out", csr, "-subj", "/CN=localhost"],
        [openssl, "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-out", cert,
         "-days", "2", "-extfile", ext],
    ):
        subprocess.run([str(a) for a in argv], check=True, capture_output=True, timeout=60)
    return ca, cert, key


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    """A TLS server context of ``cert`` and ``key``."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context


@contextmanager
def broker_behind(advertised: str, log: Path, timeout_s: float = 30.0) -> Iterator[tuple[str, int]]:
    """A plaintext in-memory Tansu advertising ``advertised`` (the front); yields its own address."""
    port = free_port()
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [broker_binary(), "broker", "--listener-url", f"tcp://127.0.0.1:{port}",
             "--advertised-listener-url", f"tcp://{advertised}"],
            stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.1)
        yield "127.0.0.1", port
    finally:
        proc.terminate()
        proc.wait(timeout=10)
