"""``eoslog pipeline``: the payments pipeline end to end, with live progress and a verified summary.

The lead registers :data:`pipeline_command` in the main CLI; it also runs on its own with
``python -m eoslog.pipeline.cli``.
"""

from __future__ import annotations

from pathlib import Path

import click


def _live_display(console):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(TextColumn("{task.description:<22}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[note]}"), TimeElapsedColumn(), console=console)
    generated = progress.add_task("payments generated", total=None, note="")
    processed = progress.add_task("payments processed", total=None, note="")

    def show(state: dict) -> None:
        progress.update(generated, total=state["total"], completed=state["generated"])
        progress.update(processed, total=state["total"], completed=state["processed"],
                        note=f"{state['batches']} batches, {state['rows_per_s']:,.0f} rows/s, {state['phase']}")

    return progress, show


def print_summary(console, result) -> None:
    from rich.table import Table

    r = result.report
    table = Table(title="payments pipeline: verification", show_lines=False)
    table.add_column("check")
    table.add_column("result")
    table.add_column("detail")
    for c in r.checks:
        table.add_row(c.name, "[green]ok[/green]" if c.ok else "[red]FAILED[/red]", c.detail)
    console.print(table)
    mode = ("exactly-once (transaction groups: each micro-batch committed atomically, replays deduplicated)"
            if result.exactly_once_groups else
            "per-task transactions (the broker lacks transaction groups; a replayed batch could duplicate)")
    console.print(
        f"{r.transfers:,} transfers ({r.valid:,} valid, {r.invalid:,} invalid) -> {r.ledger_entries:,} ledger "
        f"entries + {r.rejects:,} rejects in {len(result.batches)} micro-batches, {result.seconds:.1f} s; "
        f"batch latency p50 {result.batch_latency_ms(0.5):.0f} ms, p99 {result.batch_latency_ms(0.99):.0f} ms\n"
        f"sink commit mode: {mode}\nbroker: {result.bootstrap}\nspark: {result.spark_master}")
    for event in result.faults:
        console.print(f"fault: {event}")
    for event in result.schema_events:
        console.print(f"schema: {event}")
    console.print("[bold green]VERIFIED[/bold green]" if r.ok else "[bold red]VERIFICATION FAILED[/bold red]")


@click.command("pipeline")
@click.option("--bootstrap", default=None, help="Use this broker instead of starting one (host:port).")
@click.option("--transfers", default=200_000, show_default=True, help="How many payment transfers to generate.")
@click.option("--accounts", default=1_000, show_default=True)
@click.option("--seed", default=7, show_default=True)
@click.option("--partitions", default=2, show_default=True, help="Partitions of payments and ledger.")
@click.option("--max-offsets-per-trigger", default=50_000, show_default=True)
@click.option("--topic-prefix", default="", help="Prefix for the three topics (to reuse a broker).")
@click.option("--master", default="local[*]", show_default=True, help="Spark master.")
@click.option("--cluster", default=0, show_default=True,
              help="Start this many brokers on a real ZooKeeper (topics replicated min(3, N) times) "
                   "instead of one embedded broker.")
@click.option("--kill-broker-at", type=click.FloatRange(0, 1), default=None,
              help="With --cluster: SIGKILL the leader of the ledger's first partition once this fraction "
                   "of the payments is processed, and restart it.")
@click.option("--spark-workers", default=0, show_default=True,
              help="Run Spark as a standalone cluster, a Master and this many Workers on loopback, "
                   "instead of --master.")
@click.option("--avro", is_flag=True,
              help="Payments in Avro through a schema registry beside the broker, read as typed columns, "
                   "with a compatible schema change (a field added with a default) halfway through.")
@click.option("--workdir", type=click.Path(path_type=Path), default=None,
              help="Where the broker data and the Spark checkpoint go (default: a temporary directory).")
def pipeline_command(bootstrap, transfers, accounts, seed, partitions, max_offsets_per_trigger, topic_prefix,
                     master, cluster, kill_broker_at, spark_workers, avro, workdir):
    """Payments through Spark into a double-entry ledger, exactly once, then verified."""
    # Before anything starts: without the spark extra the run would start a broker and make its topics
    # with librdkafka first, whose clients may log their teardown above the extra's one-line hint.
    # (confluent_kafka first: the order in which the run itself would miss them.)
    import confluent_kafka  # noqa: F401
    import pyspark  # noqa: F401
    from rich.console import Console

    from eoslog.pipeline.runner import RunSettings, run

    console = Console()
    settings = RunSettings(bootstrap=bootstrap, transfers=transfers, accounts=accounts, seed=seed,
                           partitions=partitions, max_offsets_per_trigger=max_offsets_per_trigger,
                           topic_prefix=topic_prefix, master=master, workdir=workdir, cluster=cluster,
                           kill_broker_at=kill_broker_at, spark_workers=spark_workers, avro=avro)
    progress, show = _live_display(console)
    with progress:
        result = run(settings, display=show)
    print_summary(console, result)
    if not result.report.ok:
        raise SystemExit(1)


if __name__ == "__main__":
    pipeline_command()
