"""The `eoslog` command line."""

import click


@click.group()
@click.version_option(package_name="eoslog")
def main() -> None:
    """eoslog: a Kafka-compatible log broker with exactly-once semantics."""
