"""A registry instance served over HTTP: the socket bound first (so ``HOST:0`` picks a port, and the
instance's identity in the writer election names the port it really has), then the registry started and
uvicorn serving the app from a thread of its own. Used by ``eoslog schema-registry`` in the foreground and
by a broker (server/schema_registry.py) in the background."""

from __future__ import annotations

import logging
import socket
import threading

import uvicorn

from eoslog.schema_registry.app import create_app
from eoslog.schema_registry.authorization import SubjectAuthorizer
from eoslog.schema_registry.election import DEFAULT_GROUP, Identity
from eoslog.schema_registry.kafka_access import KafkaAccess
from eoslog.schema_registry.metrics import RegistryMetrics
from eoslog.schema_registry.registry import SchemaRegistry
from eoslog.schema_registry.security import RegistryTls, ScramLogin

log = logging.getLogger(__name__)


def split_listen(listen: str) -> tuple[str, int]:
    host, _, port = listen.rpartition(":")
    if not port.isdigit():
        raise ValueError(f"{listen!r}: expected HOST:PORT")
    return host.strip("[]") or "127.0.0.1", int(port)


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


GRACEFUL_SHUTDOWN_S = 2.0


class _Config(uvicorn.Config):
    """uvicorn's settings with an SSLContext made here (``security.RegistryTls``): uvicorn itself builds one
    only from file names, and the broker's TLS settings are already a context."""

    def __init__(self, app, ssl_context) -> None:
        # A client's idle keep-alive connection must not hold the registry (and the broker serving it) open:
        # over TLS its close waits for the peer's close_notify, which an idle client never sends.
        super().__init__(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S)
        self._ssl_context = ssl_context

    def load(self) -> None:
        super().load()
        self.ssl = self._ssl_context


class RegistryServer:
    def __init__(self, access: KafkaAccess, listen: str = "127.0.0.1:8081", *, advertised_host: str | None = None,
                 group: str = DEFAULT_GROUP, topic: str = "_schemas", session_timeout_ms: int = 10_000,
                 eligible: bool = True, default_compatibility: str = "BACKWARD", tls: RegistryTls | None = None,
                 auth: ScramLogin | None = None, authorizer: SubjectAuthorizer | None = None,
                 metrics=None, replication_factor: int | None = None, min_insync_replicas: int | None = None) -> None:
        host, port = split_listen(listen)
        metrics = metrics if metrics is not None else RegistryMetrics()
        self.metrics = metrics
        self.sock = bind(host, port)
        self.port = self.sock.getsockname()[1]
        self.tls = tls
        scheme = "https" if tls is not None else "http"
        shown = advertised_host or ("127.0.0.1" if host in ("0.0.0.0", "") else "::1" if host == "::" else host)
        self.registry = SchemaRegistry(access, Identity(shown, self.port, scheme, eligible), group=group, topic=topic,
                                       session_timeout_ms=session_timeout_ms,
                                       default_compatibility=default_compatibility, metrics=metrics,
                                       replication_factor=replication_factor, min_insync_replicas=min_insync_replicas)
        metrics.watch(self.registry)
        if tls is not None:
            self.registry.forward_ssl_context = tls.client
        middleware = auth.middleware() if auth is not None else None
        self.app = create_app(self.registry, middleware=middleware, metrics=metrics, authorizer=authorizer)
        self._server = uvicorn.Server(_Config(self.app, tls.server if tls is not None else None))
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()

    @property
    def url(self) -> str:
        return self.registry.identity.url

    def start(self) -> RegistryServer:
        """Serves at once; the registry itself starts on a thread of its own, retrying until the cluster
        answers (a broker serving its own registry is not serving yet when this is called). Requests
        meanwhile wait for the topic to be read, up to a deadline."""
        self._thread = threading.Thread(target=self.run_http, name="schema-registry-http", daemon=True)
        self._thread.start()
        threading.Thread(target=self._start_registry, name="schema-registry-start", daemon=True).start()
        log.info("schema registry on %s", self.url)
        return self

    def _start_registry(self) -> None:
        delay = 0.2
        while not self._stopping.is_set():
            try:
                self.registry.start()
                if self._stopping.is_set():
                    self.registry.stop()
                return
            except Exception as exc:  # noqa: BLE001 - the cluster may not be up yet: retried until stop
                log.warning("schema registry: cannot start yet: %s", exc)
            self._stopping.wait(delay)
            delay = min(delay * 2, 5.0)

    def run_http(self) -> None:
        self._server.run(sockets=[self.sock])

    def stop(self) -> None:
        self._stopping.set()
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
        self.registry.stop()
        self.sock.close()
