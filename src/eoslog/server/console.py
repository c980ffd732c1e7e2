"""The web console served by the broker itself (``--console-listen HOST:PORT`` / ``eoslog.console.listen``):
wiring only. The console (``eoslog.console``) is the same one ``eoslog console --bootstrap`` runs.

Why over the Kafka protocol, through one of this broker's own listeners, and not by reading the broker's
objects: the console's pages are the admin tools' requests (eoslog.tools), which work against any
Kafka-compatible broker, and what a page shows is then exactly what a client of that listener is allowed
to see (with security on, as the configured principal). Why a thread: those requests are blocking socket
calls, and a blocking call on the broker's event loop would stall every client, and would deadlock
outright here, since the loop is the one that must answer it. uvicorn therefore runs its own event loop
in a thread of its own, and the admin calls run in that loop's worker threads; the broker's loop only sees
ordinary client connections.

Imported only when the console is configured, so ``eoslog serve`` without it never loads Starlette,
uvicorn or Jinja2.
"""

from __future__ import annotations

import asyncio
import logging

from eoslog.server.config import BrokerConfig, ConfigError
from eoslog.server.listeners import ListenerBindError

log = logging.getLogger(__name__)


def console_listener(listeners: list, protocol: str | None):
    """The listener the console connects through: the first of ``protocol`` (the client config's
    security.protocol), or without a client config the first PLAINTEXT one. A broker with only secured
    listeners and no client config is a configuration error: the console could not log in."""
    wanted = protocol or "PLAINTEXT"
    for listener in listeners:
        if listener.protocol == wanted:
            return listener
    have = ", ".join(f"{listener.name} ({listener.protocol})" for listener in listeners)
    if protocol is None:
        raise ConfigError(f"eoslog.console.listen: the console reaches the broker through a PLAINTEXT listener "
                          f"and there is none (listeners: {have}); give the client properties for a secured "
                          "one with --console-command-config FILE (eoslog.console.command.config)")
    raise ConfigError(f"eoslog.console.command.config asks for security.protocol={protocol}, which no listener "
                      f"uses (listeners: {have})")


def connect_address(listener, bound_port: int) -> str:
    """HOST:PORT to connect to the listener from this machine (a wildcard bind is reached on loopback)."""
    host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(listener.host, listener.host)
    return f"[{host}]:{bound_port}" if ":" in host else f"{host}:{bound_port}"


class ConsoleEndpoint:
    """Owns the console's HTTP server thread and its connections to this broker; built by the broker
    when ``eoslog.console.listen`` is set, started once the listeners are bound."""

    def __init__(self, config: BrokerConfig) -> None:
        try:
            from eoslog.console.app import create_app
            from eoslog.console.schema_views import SchemaRegistryAccess, user_info_of
            from eoslog.console.server import ConsoleServer
            from eoslog.console.views import Session
        except ModuleNotFoundError as exc:
            raise ConfigError(f"eoslog.console.listen: the console needs {exc.name}: "
                              "pip install 'eoslog[console]'") from exc
        self.config = config
        self._create_app, self._server_class, self._session_class = create_app, ConsoleServer, Session
        self.session = None
        self.server = None
        self.security = None
        if config.console_command_config is not None:
            from eoslog.security.client import ClientSecurity, ClientSecurityError

            try:
                self.security = ClientSecurity.from_file(config.console_command_config)
            except (ClientSecurityError, OSError) as exc:
                raise ConfigError(f"eoslog.console.command.config: {exc}") from exc
        # Where the schema pages read: no URL until this broker's own registry, if it serves one, has bound
        # its port (use_schema_registry); it is asked as the console's principal.
        self.schema_registry = SchemaRegistryAccess(None, user_info_of(self.security))

    def start(self, listeners: list, bound_ports: dict[str, int]) -> None:
        """Binds the console's port (a taken one is an error before the data directory is touched) and
        serves from a thread. Pages asked for before the broker serves show the cluster as out of reach."""
        listener = console_listener(listeners, self.security.protocol if self.security else None)
        bootstrap = connect_address(listener, bound_ports[listener.name])
        host, port = self.config.console_listen
        self.session = self._session_class(bootstrap, self.security)
        app = self._create_app(self.session, self.config.console_allow_writes,
                               self.config.transaction_max_timeout_ms, self.schema_registry)
        try:
            self.server = self._server_class(app, f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
        except OSError as exc:
            raise ListenerBindError.for_address(host, port, "--console-listen HOST:PORT (eoslog.console.listen)", exc) from exc
        self.server.start()
        log.info("console on %s (through listener %s at %s, %s)", self.server.url, listener.name, bootstrap,
                 "writes allowed" if self.config.console_allow_writes else "read-only")

    def use_schema_registry(self, url: str, context=None) -> None:
        """Show the schemas of this broker's own registry, at ``url`` (HTTPS: trusted with ``context``)."""
        self.schema_registry.context = context
        self.schema_registry.url = url

    @property
    def bound_port(self) -> int | None:
        return None if self.server is None else self.server.port

    async def stop(self) -> None:
        # Joining the thread blocks (uvicorn finishes its open requests): off the loop, which those
        # requests' admin calls may be waiting on.
        await asyncio.to_thread(self.close)

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None
        if self.session is not None:
            self.session.close()
            self.session = None
