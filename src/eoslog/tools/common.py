"""What the topic, config, console, reset-offsets and records tools share: the ``--bootstrap-server`` /
``--bootstrap`` option, ``--json``, rich tables, errors that name a response's code and message, and the
closest valid names for a mistyped one."""

from __future__ import annotations

import difflib
import json
import sys

import click

from eoslog.protocol.errors import ErrorCode

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def bootstrap_option(command):
    """Kafka's tools say ``--bootstrap-server``; eoslog's bench and cluster tools say ``--bootstrap``: both
    are accepted, as is ``-b``."""
    return click.option("--bootstrap-server", "--bootstrap", "-b", "bootstrap", default=DEFAULT_BOOTSTRAP,
                        show_default=True, metavar="HOST:PORT[,...]",
                        help="Brokers to ask over the Kafka protocol.")(command)


def json_option(command):
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts instead of a table.")(command)


def error_name(code: int) -> str:
    return ErrorCode(code).name if code in ErrorCode._value2member_map_ else f"error {code}"


def check(code: int, what: str, message: str | None = None) -> None:
    """A non-zero error code becomes the command's one-line error (exit code 1), with the broker's
    message when it sent one: that message carries the valid range or values of a rejected config."""
    if code:
        name = error_name(code)
        detail = message if message and message.startswith(name) else f"{name}: {message}" if message else name
        raise click.ClickException(f"{what}: {detail}")


def closest(name: str, valid: list[str]) -> str:
    """``'x' is not one of them; closest: a, b, c`` for an unknown name."""
    near = difflib.get_close_matches(name, valid, n=3, cutoff=0.5)
    if not near:  # same words in another order, or one word of it: retention -> retention.ms, retention.bytes
        near = [v for v in valid if any(part and part in v for part in name.split("."))][:3]
    return f"closest: {', '.join(near)}" if near else f"valid names: {', '.join(sorted(valid))}"


def plural(count: int, noun: str) -> str:
    """``1 partition``, ``3 partitions``, ``0 partitions``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def emit_json(value) -> None:
    click.echo(json.dumps(value))


def print_table(rows: list[list], headers: list[str], title: str | None = None) -> None:
    """A rich table on stdout; full width when stdout is not a terminal, so piped output is not cut."""
    from rich.console import Console
    from rich.table import Table

    table = Table(*headers, title=title, box=None, header_style="bold", title_justify="left", pad_edge=False)
    for row in rows:
        table.add_row(*("-" if cell is None else str(cell) for cell in row))
    console = Console(width=None if sys.stdout.isatty() else 1000, highlight=False)
    with console.capture() as captured:
        console.print(table)
    # rich pads every cell to its column's width; trailing blanks only get in the way of grep and diff
    click.echo("\n".join(line.rstrip() for line in captured.get().splitlines()))


def progress(total: int | None, description: str):
    """A progress bar on stderr for long operations (``total`` None: a count with no end known), shown
    only on a terminal so that scripts and pipes get none of it."""
    from rich.console import Console
    from rich.progress import Progress

    console = Console(file=sys.stderr)
    bar = Progress(console=console, transient=True, disable=not console.is_terminal or total == 1)
    return bar, bar.add_task(description, total=total)
