"""The schema registry served by the broker itself (``--schema-registry-listen HOST:PORT`` /
``eoslog.schema.registry.listen``): wiring only. The registry (``eoslog.schema_registry``) is the same one
``eoslog schema-registry --bootstrap`` runs, and reaches this broker the way the console does: as a client
of one of its own listeners, from threads of its own (server/console.py says why), so its ``_schemas``
topic, its writer election and its transactions are ordinary Kafka traffic.

Imported only when the registry is configured, so ``eoslog serve`` without it never loads Starlette,
uvicorn, Avro, jsonschema, protobuf or librdkafka.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from eoslog.server.config import BrokerConfig, ConfigError
from eoslog.server.console import connect_address

log = logging.getLogger(__name__)


def registry_listener(listeners: list, protocol: str | None):
    wanted = protocol or "PLAINTEXT"
    for listener in listeners:
        if listener.protocol == wanted:
            return listener
    have = ", ".join(f"{listener.name} ({listener.protocol})" for listener in listeners)
    raise ConfigError(f"eoslog.schema.registry.listen: the registry reaches the broker through a {wanted} "
                      f"listener and there is none (listeners: {have}); give the client properties for a "
                      "secured one with eoslog.schema.registry.command.config")


def registry_tls(config: BrokerConfig, listeners: list):
    """HTTPS with the broker's own TLS settings: those of its first SSL or SASL_SSL listener, for serving
    and for trusting the other brokers' registries when a write is forwarded (server/tls.py)."""
    from eoslog.schema_registry.security import RegistryTls
    from eoslog.server.tls import TlsConfigError, client_context, server_context

    secured = [listener for listener in listeners if listener.protocol in ("SSL", "SASL_SSL")]
    if not secured:
        raise ConfigError("eoslog.schema.registry.listen=https://...: HTTPS takes the TLS settings of the broker's "
                          "SSL or SASL_SSL listener, and it has none")
    try:
        return RegistryTls(server_context(config.security_properties, secured[0]),
                           client_context(config.security_properties, secured[0]))
    except TlsConfigError as exc:
        raise ConfigError(f"eoslog.schema.registry.listen=https://...: {exc}") from exc


class SchemaRegistryEndpoint:
    """Owns the registry's HTTP server and its Kafka clients; built by the broker when
    ``eoslog.schema.registry.listen`` is set, started once the listeners are bound."""

    def __init__(self, config: BrokerConfig) -> None:
        try:
            from eoslog.schema_registry.server import RegistryServer
        except ModuleNotFoundError as exc:
            raise ConfigError(f"eoslog.schema.registry.listen: the schema registry needs {exc.name}: "
                              "pip install 'eoslog[schema-registry]'") from exc
        self.config = config
        self._server_class = RegistryServer
        self.server = None
        self.tls = None  # RegistryTls with HTTPS: its client context trusts this registry too
        self.properties: dict[str, str] = {}
        if config.schema_registry_command_config is not None:
            from eoslog.security.properties import read_properties

            try:
                self.properties = read_properties(Path(config.schema_registry_command_config))
            except OSError as exc:
                raise ConfigError(f"eoslog.schema.registry.command.config: {exc}") from exc

    def start(self, listeners: list, bound_ports: dict[str, int]) -> None:
        from eoslog.schema_registry.kafka_access import KafkaAccess

        protocol = self.properties.get("security.protocol", "PLAINTEXT").strip().upper() if self.properties else None
        listener = registry_listener(listeners, protocol)
        bootstrap = connect_address(listener, bound_ports[listener.name])
        host, port = self.config.schema_registry_listen
        access = KafkaAccess(bootstrap, self.properties)
        tls = registry_tls(self.config, listeners) if self.config.schema_registry_https else None
        auth = None
        if self.config.schema_registry_basic_auth:
            from eoslog.schema_registry.security import ScramLogin

            try:
                auth = ScramLogin(access)
            except ValueError as exc:
                raise ConfigError(f"eoslog.schema.registry.basic.auth: {exc} "
                                  "(eoslog.schema.registry.command.config)") from exc
        authorizer = None
        if self.config.schema_registry_authorization:
            from eoslog.schema_registry.authorization import SubjectAuthorizer

            if auth is None:
                raise ConfigError("eoslog.schema.registry.authorization needs to know who asks: set "
                                  "eoslog.schema.registry.basic.auth=true")
            # this broker's own super users and default; the ACLs are read through the listener
            authorizer = SubjectAuthorizer(access, self.config.super_users,
                                           self.config.allow_everyone_if_no_acl_found)
        # On a cluster, _schemas is replicated as __transaction_state is (its writes are transactions too), and
        # its creation waits until that many brokers are up; a sole broker has one replica of everything.
        replicas = min_isr = None
        if self.config.cluster_mode:
            replicas = self.config.transaction_state_log_replication_factor
            min_isr = self.config.transaction_state_log_min_isr
        try:
            self.server = self._server_class(access, f"[{host}]:{port}" if ":" in host else f"{host}:{port}",
                                             tls=tls, auth=auth, authorizer=authorizer, replication_factor=replicas,
                                             min_insync_replicas=min_isr)
        except OSError as exc:
            raise ConfigError(f"eoslog.schema.registry.listen {host}:{port}: {exc}") from exc
        self.tls = tls
        self.server.start()
        log.info("schema registry on %s (through listener %s at %s)", self.server.url, listener.name, bootstrap)

    @property
    def bound_port(self) -> int | None:
        return None if self.server is None else self.server.port

    def local_url(self) -> str:
        """The registry's URL from this machine (a wildcard bind is reached on loopback), for the console."""
        host, _ = self.config.schema_registry_listen
        host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
        scheme = "https" if self.config.schema_registry_https else "http"
        return f"{scheme}://{'[' + host + ']' if ':' in host else host}:{self.bound_port}"

    async def stop(self) -> None:
        await asyncio.to_thread(self.close)  # joins threads whose Kafka calls this broker's loop answers

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None
