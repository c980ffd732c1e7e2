"""The `eoslog` command line (click)."""

from __future__ import annotations

import gc
from pathlib import Path

import click


def _configure_logging(levels: str | tuple[str, ...], log_format: str = "text") -> None:
    from eoslog.server.logging_setup import configure_logging, parse_levels

    try:
        root, per_logger = parse_levels([levels] if isinstance(levels, str) else levels)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--log-level") from None
    configure_logging(root, per_logger, log_format)


def _complete_log_level(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """Shell completion of ``--log-level``: a level, or the level after ``LOGGER=``."""
    from eoslog.server.logging_setup import LEVELS

    logger, sep, level = incomplete.rpartition("=")
    return [f"{logger}{sep}{name}" for name in LEVELS if name.startswith(level.lower())]


class LazyGroup(click.Group):
    """Subcommands imported on first use, so `eoslog serve` never pays for Spark, plotting or clients."""

    LAZY = {
        "acls": "eoslog.tools.acls_cli:acls_group",
        "bench": "eoslog.loadgen.bench:bench_command",
        "cluster": "eoslog.tools.cluster_cli:cluster_group",
        "configs": "eoslog.tools.configs_cli:configs_group",
        "console": "eoslog.console.cli:console_command",
        "consume": "eoslog.tools.console_cli:consume_command",
        "groups": "eoslog.tools.groups_cli:groups_group",
        "pipeline": "eoslog.pipeline.cli:pipeline_command",
        "produce": "eoslog.tools.console_cli:produce_command",
        "producers": "eoslog.tools.txn_cli:producers_group",
        "records": "eoslog.tools.records_cli:records_group",
        "schema-registry": "eoslog.schema_registry.cli:schema_registry_command",
        "share-groups": "eoslog.tools.share_groups_cli:share_groups_group",
        "schemas": "eoslog.schema_registry.schemas_cli:schemas_group",
        "topics": "eoslog.tools.topics_cli:topics_group",
        "transactions": "eoslog.tools.txn_cli:transactions_group",
        "users": "eoslog.tools.users_cli:users_group",
        "verify": "eoslog.verify.cli:verify_command",
    }

    def list_commands(self, ctx: click.Context) -> list[str]:
        names = set(super().list_commands(ctx))
        for name in self.LAZY:
            try:
                if self.get_command(ctx, name) is not None:
                    names.add(name)
            except ImportError:
                pass  # its extra is missing: not listed, so --help and shell completion still work
        return sorted(names)

    def invoke(self, ctx: click.Context):
        """A command whose extra is missing stops with one line that names it (tools/extras.py)."""
        try:
            return super().invoke(ctx)
        except ImportError as exc:
            from eoslog.tools.extras import hint, missing_module

            module = missing_module(exc)
            if module is None:
                raise
            raise click.ClickException(hint(ctx.invoked_subcommand, module)) from None

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.LAZY:
            import importlib

            module_name, attribute = self.LAZY[name].split(":")
            try:
                module = importlib.import_module(module_name)
            except ModuleNotFoundError as exc:
                if exc.name is not None and module_name.startswith(exc.name):
                    return None  # that part of eoslog is not installed in this build
                raise
            command = getattr(module, attribute)
            command.name = name
            return command
        return super().get_command(ctx, name)


@click.group(cls=LazyGroup)
@click.version_option(package_name="eoslog", prog_name="eoslog")
@click.pass_context
def main(ctx: click.Context) -> None:
    """eoslog: a Kafka-compatible log broker with exactly-once semantics."""
    if ctx.invoked_subcommand != "serve":
        # The entry point (__main__.py) turned the collector off for start-up; only serve keeps it off
        # until it has frozen its start-up objects (server/gc_policy.py).
        gc.enable()


@main.command()
@click.option("--data-dir", type=click.Path(path_type=Path), default=None,
              help="Where partition logs live (default ./eoslog-data).")
@click.option("--listen", default=None, help="HOST:PORT to listen on (default 127.0.0.1:9092; port 0 picks one).")
@click.option("--advertised-listener", default=None,
              help="HOST:PORT that Metadata tells clients (for a broker behind a proxy or NAT).")
@click.option("--config", "config_file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="A properties file with Kafka's property names (num.partitions, log.retention.ms, ...).")
@click.option("--set", "overrides", multiple=True, metavar="NAME=VALUE", help="Set one property (repeatable).")
@click.option("--port-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the bound port here once the broker accepts connections.")
@click.option("--broker-id", type=int, default=None, help="This broker's id in a cluster (broker.id).")
@click.option("--zookeeper", default=None, metavar="HOST:PORT[,...][/CHROOT]",
              help="Join the cluster coordinated by this ZooKeeper (zookeeper.connect); without it, a single node.")
@click.option("--metrics-listen", default=None, metavar="HOST:PORT",
              help="Serve Prometheus metrics at http://HOST:PORT/metrics (eoslog.metrics.listen; off by default).")
@click.option("--console-listen", default=None, metavar="HOST:PORT",
              help="Serve the web console at http://HOST:PORT/ (eoslog.console.listen; off by default; needs "
                   "eoslog[console]).")
@click.option("--console-allow-writes", is_flag=True,
              help="Offer the console's write actions (eoslog.console.allow.writes; read-only by default).")
@click.option("--console-command-config", default=None, metavar="FILE",
              help="Client properties for the console to reach this broker through a secured listener "
                   "(eoslog.console.command.config; default: the first PLAINTEXT listener).")
@click.option("--schema-registry-listen", default=None, metavar="[https://]HOST:PORT",
              help="Serve the schema registry (Confluent's REST API) at http(s)://HOST:PORT/ "
                   "(eoslog.schema.registry.listen; off by default; needs eoslog[schema-registry]).")
@click.option("--log-level", "log_levels", multiple=True, default=("info",), show_default=True,
              metavar="[LOGGER=]LEVEL", shell_complete=_complete_log_level,
              help="debug, info, warning or error; LOGGER=LEVEL sets one component, e.g. eoslog.cluster=debug "
                   "(repeatable).")
@click.option("--log-format", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="json: one JSON object per line (ts, level, logger, message, extra fields).")
def serve(data_dir, listen, advertised_listener, config_file, overrides, port_file, broker_id, zookeeper,
          metrics_listen, console_listen, console_allow_writes, console_command_config, schema_registry_listen,
          log_levels, log_format) -> None:
    """Run a broker in the foreground until SIGTERM or SIGINT: a single node, or with --zookeeper a
    member of a replicated cluster (docs/cluster.md)."""
    # A plain command line never gets here: eoslog/__main__.py runs it without importing click
    # (server/serve_command.py); this is the path for everything click must parse or report.
    _configure_logging(log_levels, log_format)
    from eoslog.server.serve_command import ServeError, run_serve

    try:
        run_serve(data_dir, listen, advertised_listener, config_file, overrides, port_file, broker_id, zookeeper,
                  metrics_listen, console_listen, console_allow_writes, console_command_config,
                  schema_registry_listen, log_levels, log_format)
    except ServeError as exc:
        raise click.ClickException(str(exc)) from None


@main.command()
@click.option("--messages", default=100_000, show_default=True, help="How many messages to send through.")
def demo(messages: int) -> None:
    """Start an embedded broker, send messages through it with a real client, and verify them."""
    _configure_logging("warning")
    from eoslog.pipeline.demo import run_demo

    run_demo(messages)

