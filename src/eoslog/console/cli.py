"""``eoslog console``: the web console against any Kafka-compatible cluster (registered lazily in
eoslog.cli, so ``eoslog serve`` never imports Starlette or uvicorn)."""

from __future__ import annotations

from pathlib import Path

import click

from eoslog.tools.brokers import security_option
from eoslog.tools.common import bootstrap_option

DEFAULT_LISTEN = "127.0.0.1:8080"


@click.command("console")
@bootstrap_option
@security_option
@click.option("--listen", default=DEFAULT_LISTEN, show_default=True, metavar="HOST:PORT",
              help="Where the console serves HTTP (port 0 picks a free one).")
@click.option("--allow-writes", is_flag=True,
              help="Offer the write actions (aborting transactions, resetting a group's offsets, deleting "
                   "records); without it they answer 403.")
@click.option("--hanging-after-ms", type=click.IntRange(min=0), default=900_000, show_default=True,
              help="A transaction open longer than this is shown as hanging (transaction.max.timeout.ms).")
@click.option("--schema-registry-url", default=None, metavar="URL",
              help="The schema registry whose subjects the schema pages show (Confluent's REST API: eoslog's, "
                   "Confluent's, Karapace). Without it they say none is configured.")
@click.option("--schema-registry-user-info", default=None, metavar="USER:PASSWORD",
              help="HTTP basic credentials for the registry (default: the SASL user and password of "
                   "--command-config, the principal the console logs in to the cluster as).")
@click.option("--schema-registry-ca-file", type=click.Path(exists=True, dir_okay=False), default=None,
              help="The CA of the registry's HTTPS certificate (default: the system's).")
@click.option("--port-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the bound port here once the console accepts connections.")
def console_command(bootstrap: str, security, listen: str, allow_writes: bool, hanging_after_ms: int,
                    schema_registry_url: str | None, schema_registry_user_info: str | None,
                    schema_registry_ca_file: str | None, port_file: Path | None) -> None:
    """Serve a web console showing brokers, topics (records with aborted transactions marked), consumer
    groups with their lag, and transactions (docs/console.md)."""
    # Without the console extra these imports fail, and the CLI says which extra (tools/extras.py).
    from eoslog.console.app import create_app
    from eoslog.console.schema_views import SchemaRegistryAccess, user_info_of
    from eoslog.console.server import ConsoleServer
    from eoslog.console.views import Session

    session = Session(bootstrap, security)
    registry = SchemaRegistryAccess(schema_registry_url, schema_registry_user_info or user_info_of(security),
                                    schema_registry_ca_file)
    try:
        server = ConsoleServer(create_app(session, allow_writes, hanging_after_ms, registry), listen)
    except OSError as exc:
        raise click.ClickException(bind_error_line(listen, exc)) from None
    if port_file is not None:
        port_file.write_text(f"{server.port}\n")
    click.echo(f"eoslog console on {server.url} for {bootstrap}"
               f" ({'writes allowed' if allow_writes else 'read-only'})", err=True)
    try:
        server.run()
    finally:
        session.close()


def bind_error_line(listen: str, exc: OSError) -> str:
    """The broker's one line for a port it cannot bind (server/listeners.py, ListenerBindError), in the
    same words; written here because the console room must not import the server, which imports it."""
    import errno

    if exc.errno == errno.EADDRINUSE:
        return f"port {listen} is in use (another console?) — stop it or choose another --listen HOST:PORT"
    return f"cannot listen on {listen}: {exc.strerror or exc} — choose another --listen HOST:PORT"
