"""`eoslog records delete-before`: Kafka's kafka-delete-records.sh. Moves partitions' log start offsets
forward (DeleteRecords at each leader); consumers can no longer read below them.

    eoslog records delete-before --topic orders --partition 0 --offset 1200
    eoslog records delete-before --offset-json-file offsets.json

The JSON file has Kafka's shape: ``{"version": 1, "partitions": [{"topic": "orders", "partition": 0,
"offset": 1200}]}``; offset -1 means the high watermark (everything committed so far).
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from eoslog.tools import admin_requests as admin
from eoslog.tools.brokers import Brokers, security_option
from eoslog.tools.common import bootstrap_option, emit_json, json_option, print_table


def read_offsets_file(path: Path) -> dict[tuple[str, int], int]:
    try:
        document = json.loads(path.read_text())
        return {(str(p["topic"]), int(p["partition"])): int(p["offset"]) for p in document["partitions"]}
    except (ValueError, KeyError, TypeError) as exc:
        raise click.BadParameter(f'{path}: expected {{"partitions": [{{"topic", "partition", "offset"}}, ...]}} '
                                 f"({exc})", param_hint="--offset-json-file") from exc


@click.group("records")
def records_group() -> None:
    """Delete records at the start of partitions."""


@records_group.command("delete-before")
@click.option("--topic", default=None)
@click.option("--partition", "partitions", type=int, multiple=True,
              help="Repeatable; default every partition of --topic.")
@click.option("--offset", type=int, default=None, help="The new log start offset; -1: the high watermark.")
@click.option("--offset-json-file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Partitions and offsets in Kafka's kafka-delete-records.sh format.")
@bootstrap_option
@security_option
@json_option
def delete_before_command(topic, partitions, offset, offset_json_file, bootstrap, security, as_json) -> None:
    """Delete the records below an offset."""
    if offset_json_file is not None:
        if topic is not None or offset is not None or partitions:
            raise click.UsageError("--offset-json-file replaces --topic, --partition and --offset")
        before = read_offsets_file(offset_json_file)
    elif topic is None or offset is None:
        raise click.UsageError("give --topic and --offset (with --partition), or --offset-json-file")
    else:
        before = None
    with Brokers(bootstrap, security=security) as brokers:
        if before is None:
            [view] = admin.topics(brokers, [topic])
            wanted = list(partitions) or [p.partition for p in view.partitions]
            missing = sorted(set(wanted) - {p.partition for p in view.partitions})
            if missing:
                raise click.ClickException(f"topic {topic} has no partition {', '.join(map(str, missing))}")
            before = {(topic, p): offset for p in wanted}
        results = admin.delete_records(brokers, before)
    rows = [{"topic": t, "partition": p, "requested": before[(t, p)], "low_watermark": low, "error": error}
            for (t, p), (low, error) in sorted(results.items())]
    if as_json:
        emit_json(rows)
    else:
        print_table([[r["topic"], r["partition"], r["requested"], r["low_watermark"] if not r["error"] else None,
                      r["error"] or None] for r in rows],
                    ["TOPIC", "PARTITION", "REQUESTED", "LOG-START", "ERROR"])
    failed = [r for r in rows if r["error"]]
    if failed:
        raise click.ClickException(f"{len(failed)} of {len(rows)} partitions failed: "
                                   + ", ".join(f"{r['topic']}-{r['partition']} {r['error']}" for r in failed))
