"""HTTPS and HTTP basic authentication for the registry (docs/schema-registry.md, "Security").

- HTTPS: ``RegistryTls`` holds the context the registry serves with and the one it trusts other instances
  with when it forwards a write. ``eoslog serve`` builds them from the broker's own TLS settings
  (server/schema_registry.py); ``eoslog schema-registry`` from PEM files (``--ssl-certfile`` ...).
- Basic authentication against the cluster's SCRAM users: the registry keeps no password. It checks a
  user's password by logging in to the cluster as that user, SASL/SCRAM over the listener the registry
  itself reaches (its client properties with the user's name and password in place of its own), so the
  broker's credential store decides, in a single node as in a cluster, in front of eoslog or any Kafka.
  A success is remembered for ``LOGIN_CACHE_S`` (by a hash of the password), so a client's requests cost
  one login a minute, not one each.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import ssl
import threading
import time
from dataclasses import dataclass

from eoslog.schema_registry.kafka_access import KafkaAccess

LOGIN_CACHE_S = 60.0
LOGIN_TIMEOUT_S = 10.0
REALM = "eoslog-schema-registry"
PRINCIPAL_SCOPE_KEY = "eoslog.principal"  # where the middleware leaves "User:<name>" in the ASGI scope


@dataclass(frozen=True)
class RegistryTls:
    server: ssl.SSLContext                # what the registry serves HTTPS with
    client: ssl.SSLContext | None = None  # what it trusts another instance with when forwarding a write

    @classmethod
    def from_files(cls, certfile: str, keyfile: str | None = None, cafile: str | None = None,
                   password: str | None = None) -> RegistryTls:
        """The certificate chain (with its key, or the key in ``keyfile``) and the CA that signed the
        other instances' certificates (default: the system's)."""
        server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server.load_cert_chain(certfile, keyfile, password)
        return cls(server, ssl.create_default_context(cafile=cafile))


class LoginFailed(Exception):
    """The cluster refused the user's name and password."""


class ScramLogin:
    """Checks HTTP basic credentials by logging in to the cluster with them."""

    def __init__(self, access: KafkaAccess, cache_s: float = LOGIN_CACHE_S) -> None:
        from eoslog.security.client import ClientSecurity, ClientSecurityError

        protocol = access.properties.get("security.protocol", "PLAINTEXT").strip().upper()
        if not protocol.startswith("SASL"):
            raise ValueError("basic authentication checks passwords by logging in to the cluster with SASL/SCRAM: "
                             "the registry's client properties need security.protocol=SASL_PLAINTEXT or SASL_SSL")
        self.access = access
        self.cache_s = cache_s
        self._base = {k: v for k, v in access.properties.items() if k != "sasl.jaas.config"}
        self._base.setdefault("sasl.mechanism", access.properties.get("sasl.mechanisms", "SCRAM-SHA-512"))
        try:  # the properties checked now rather than at the first request
            ClientSecurity.from_properties({**self._base, "sasl.username": "x", "sasl.password": "x"})
        except ClientSecurityError as exc:
            raise ValueError(str(exc)) from None
        self._known: dict[tuple[str, bytes], float] = {}  # (user, sha256(password)) -> until
        self._lock = threading.Lock()

    def verify(self, user: str, password: str) -> None:
        """Returns if the cluster accepts ``user`` with ``password``; LoginFailed if it refuses; OSError if
        it cannot be reached."""
        from eoslog.client.connection import BrokerConnection
        from eoslog.security.client import ClientSecurity, ClientSecurityError

        key = (user, hashlib.sha256(password.encode()).digest())
        now = time.monotonic()
        with self._lock:
            if self._known.get(key, 0.0) > now:
                return
        security = ClientSecurity.from_properties({**self._base, "sasl.username": user, "sasl.password": password})
        try:
            BrokerConnection.from_bootstrap(self.access.bootstrap, security=security, timeout_s=LOGIN_TIMEOUT_S,
                                            client_id="eoslog-schema-registry-login").close()
        except ClientSecurityError as exc:
            raise LoginFailed(str(exc)) from None
        with self._lock:
            self._known = {k: until for k, until in self._known.items() if until > now}
            self._known[key] = now + self.cache_s

    def middleware(self) -> list:
        from starlette.middleware import Middleware

        return [Middleware(BasicAuth, login=self)]


def basic_credentials(header: bytes | None) -> tuple[str, str] | None:
    """``Authorization: Basic base64(user:password)`` parsed; None when absent or malformed."""
    if not header:
        return None
    scheme, _, encoded = header.decode("latin-1").partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        user, colon, password = base64.b64decode(encoded.strip(), validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None
    return (user, password) if colon and user else None


class BasicAuth:
    """ASGI middleware: every request carries a user the cluster accepts, or gets 401 (Confluent's body
    and a WWW-Authenticate challenge); the principal goes into the scope for authorization."""

    def __init__(self, app, login: ScramLogin) -> None:
        self.app = app
        self.login = login

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        from starlette.concurrency import run_in_threadpool

        credentials = basic_credentials(dict(scope["headers"]).get(b"authorization"))
        if credentials is None:
            await _refuse(send, 401, "Unauthorized: this registry needs HTTP basic authentication")
            return
        try:
            await run_in_threadpool(self.login.verify, *credentials)
        except LoginFailed:
            await _refuse(send, 401, f"Unauthorized: the cluster refused user {credentials[0]!r}")
            return
        except OSError as exc:
            await _refuse(send, 500, f"Error in the backend data store: cannot reach the cluster to check "
                                     f"the credentials: {exc}", error_code=50001)
            return
        await self.app({**scope, PRINCIPAL_SCOPE_KEY: f"User:{credentials[0]}"}, receive, send)


async def _refuse(send, status: int, message: str, error_code: int | None = None) -> None:
    import json

    body = json.dumps({"error_code": error_code or status, "message": message}).encode()
    headers = [(b"content-type", b"application/vnd.schemaregistry.v1+json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", f'Basic realm="{REALM}"'.encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
