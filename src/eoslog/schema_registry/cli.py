"""``eoslog schema-registry``: a registry in front of any Kafka-compatible cluster, in the foreground until
SIGTERM or SIGINT. Several of them with the same ``--group`` elect one writer among themselves."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import click


def _access(bootstrap: str, command_config: str | None):
    from eoslog.schema_registry.kafka_access import KafkaAccess
    from eoslog.security.client import ClientSecurity, ClientSecurityError
    from eoslog.security.properties import read_properties

    properties = read_properties(Path(command_config)) if command_config else {}
    try:
        ClientSecurity.from_properties(properties)
    except ClientSecurityError as exc:
        raise click.BadParameter(str(exc), param_hint="--command-config") from exc
    return KafkaAccess(bootstrap, properties)


@click.command()
@click.option("--bootstrap", required=True, metavar="HOST:PORT[,...]", help="The Kafka cluster holding _schemas.")
@click.option("--listen", default="127.0.0.1:8081", show_default=True, metavar="HOST:PORT",
              help="Where to serve the REST API (port 0 picks one).")
@click.option("--advertised-host", default=None, help="The host other instances forward writes to (default: the "
              "listen host, or 127.0.0.1 for a wildcard).")
@click.option("--command-config", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Client properties for a secured listener (security.protocol, sasl.*, ssl.*).")
@click.option("--group", default="schema-registry", show_default=True, help="The group instances elect a writer in.")
@click.option("--topic", default="_schemas", show_default=True, help="The compacted topic holding the schemas.")
@click.option("--session-timeout-ms", default=10_000, show_default=True,
              help="How long a silent writer keeps its place before another is elected.")
@click.option("--replication-factor", type=int, default=None, help="Replicas of a _schemas topic this creates "
              "(default: as many as there are brokers, up to 3).")
@click.option("--compatibility", default="BACKWARD", show_default=True,
              help="The compatibility level while none is configured.")
@click.option("--no-writer", is_flag=True, help="Never be elected writer (forward every write).")
@click.option("--ssl-certfile", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Serve HTTPS with this PEM certificate chain (and its key, unless --ssl-keyfile).")
@click.option("--ssl-keyfile", type=click.Path(exists=True, dir_okay=False), default=None)
@click.option("--ssl-cafile", type=click.Path(exists=True, dir_okay=False), default=None,
              help="The CA other instances' certificates are checked against when writes are forwarded.")
@click.option("--basic-auth", is_flag=True, help="Require HTTP basic authentication, checked by logging in to the "
              "cluster as that user (SASL/SCRAM through --command-config's listener; docs/schema-registry.md).")
@click.option("--authorize", is_flag=True, help="Authorize subjects through the cluster's ACLs, as the topics "
              "they describe (needs --basic-auth; docs/schema-registry.md).")
@click.option("--super-users", default="", metavar="User:A;User:B", help="With --authorize: principals allowed "
              "everything, as the brokers' super.users.")
@click.option("--allow-everyone-if-no-acl-found", is_flag=True, help="With --authorize: as the brokers' setting.")
@click.option("--port-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the bound port here once serving.")
@click.option("--log-level", default="info", show_default=True)
def schema_registry_command(bootstrap, listen, advertised_host, command_config, group, topic, session_timeout_ms,
                            replication_factor, compatibility, no_writer, ssl_certfile, ssl_keyfile, ssl_cafile, basic_auth, authorize,
                            super_users, allow_everyone_if_no_acl_found, port_file, log_level) -> None:
    """Serve the Confluent Schema Registry REST API, storing schemas in a Kafka topic."""
    import logging

    # The libraries the registry needs only later (the _schemas client once the server runs, a format's
    # parser at its first registration) are imported now, so a missing extra stops the command with
    # cli.py's one-line hint instead of a server that retries or answers 500.
    import avro  # noqa: F401
    import confluent_kafka  # noqa: F401
    import grpc_tools  # noqa: F401
    import jsonschema  # noqa: F401

    from eoslog.schema_registry.server import RegistryServer
    from eoslog.schema_registry.state import COMPATIBILITY_LEVELS

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if compatibility.upper() not in COMPATIBILITY_LEVELS:
        raise click.BadParameter(f"one of {', '.join(COMPATIBILITY_LEVELS)}", param_hint="--compatibility")
    from eoslog.schema_registry.security import RegistryTls, ScramLogin

    access = _access(bootstrap, command_config)
    tls = auth = None
    if ssl_certfile:
        try:
            tls = RegistryTls.from_files(ssl_certfile, ssl_keyfile, ssl_cafile)
        except (OSError, ValueError) as exc:
            raise click.BadParameter(f"cannot load the certificate: {exc}", param_hint="--ssl-certfile") from None
    if basic_auth:
        try:
            auth = ScramLogin(access)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--basic-auth") from None
    authorizer = None
    if authorize:
        from eoslog.schema_registry.authorization import SubjectAuthorizer

        if not basic_auth:
            raise click.BadParameter("authorization needs to know who asks: add --basic-auth", param_hint="--authorize")
        authorizer = SubjectAuthorizer(access, frozenset(u.strip() for u in super_users.split(";") if u.strip()),
                                       allow_everyone_if_no_acl_found)
    try:
        server = RegistryServer(access, listen, advertised_host=advertised_host,
                                group=group, topic=topic, session_timeout_ms=session_timeout_ms,
                                eligible=not no_writer, default_compatibility=compatibility.upper(), tls=tls,
                                auth=auth, authorizer=authorizer, replication_factor=replication_factor)
    except (OSError, ValueError) as exc:
        raise click.ClickException(f"--listen {listen}: {exc}") from None
    stopping = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopping.set())
    server.start()
    if port_file is not None:
        port_file.write_text(f"{server.port}\n")
    click.echo(f"schema registry on {server.url} (bootstrap {bootstrap}, topic {topic}, group {group})")
    stopping.wait()
    server.stop()
