"""The doc-test convention (issue 40): a fenced block in README.md or docs/ that follows the line
``<!-- doc-test -->`` is run by tests/docs/test_docs.py, so a doc that drifts from the code fails the suite.
The comment does not show when the Markdown is rendered; everything else about the block stays as a reader
expects it.

``<!-- doc-test: HARNESS -->`` names what the block assumes instead of the plain single node:
``cluster`` (`eoslog cluster up`, tests/docs/test_docs_cluster.py), ``security`` (a broker with TLS, SASL
and ACLs, test_docs_security.py), ``console`` (`eoslog console` beside a broker, test_docs_console.py) and
``spark`` (PySpark, test_docs_spark.py). Each harness starts its part once for a page and runs that page's
blocks of its kind in order; the addresses and paths the page shows (``127.0.0.1:9092``, ``/tmp/c``) stand
for the harness's own, in both the commands and their output (tests/docs/doc_runner.py).

- A shell block is a transcript: ``$ COMMAND`` (continued by a trailing backslash or a here-document
  up to its end word) and the output the
  command prints, stdout and stderr together, up to the next ``$``. A line ``...`` stands for any number of
  lines, and ``...`` inside a line for any text (a timestamp); two or more blanks stand for any gap of
  two or more, so a table's columns may be wider or narrower than on the page. Commands run in bash, in
  document order, all the blocks of one file in one temporary directory, as one shell session (a variable
  one command sets is there for the next), against the broker the test provides.
- A ``python`` block runs as it is written, its blocks of one file in one namespace, in that directory.

The tools' default address, 127.0.0.1:9092, is the test broker's: the ``eoslog`` on the commands' PATH is a
shim that runs eoslog's CLI with ``--bootstrap-server`` set to it (tests/docs/test_docs.py). Blocks of
different files share the broker, so each file uses topic and group names of its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

MARKER = "<!-- doc-test -->"
_MARKER = re.compile(r"^<!-- doc-test(?:: ([a-z]+))? -->$")
HARNESSES = ("broker", "cluster", "security", "console", "spark")
_FENCE = re.compile(r"^(\s*)(```+)(\S*)\s*$")


@dataclass
class Command:
    text: str  # what bash runs (continuation lines joined)
    expected: list[str] = field(default_factory=list)
    line: int = 0  # 1-based, in the Markdown file


@dataclass
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    language: str
    lines: list[str]
    harness: str = "broker"

    @property
    def where(self) -> str:
        return f"{self.path.name}:{self.line}"

    def commands(self) -> list[Command]:
        """The transcript's commands with their expected output; a block with no ``$`` line is an error,
        so a marked block can never be skipped by accident."""
        commands: list[Command] = []
        continuing, here_document = False, None
        for offset, line in enumerate(self.lines, start=self.line + 1):
            if here_document is not None:
                commands[-1].text += "\n" + line
                if line == here_document:
                    here_document = None
            elif continuing:
                commands[-1].text += "\n" + line
                continuing = line.endswith("\\")
                here_document = _here_document(line)
            elif line.startswith("$ "):
                commands.append(Command(line[2:], line=offset))
                continuing = line.endswith("\\")
                here_document = _here_document(line)
            elif commands:
                commands[-1].expected.append(line)
            elif line.strip():
                raise ValueError(f"{self.where}: output before the first `$ ` command: {line!r}")
        if not commands:
            raise ValueError(f"{self.where}: a doc-test shell block with no `$ ` command")
        if here_document is not None:
            raise ValueError(f"{self.where}: the here-document {here_document} is not closed")
        return commands


def _here_document(line: str) -> str | None:
    """The word that ends a here-document the line opens (``cat > f <<'EOF'``), so its lines are the
    command's, not its output."""
    opened = re.search(r"<<-?\s*(['\"]?)(\w+)\1", line)
    return opened.group(2) if opened else None


def blocks(path: Path, harness: str | None = None) -> list[Block]:
    """The marked fenced blocks of one Markdown file, in order: all of them, or those of one harness. A
    marker naming no known harness is an error, so a typo cannot leave a block unrun."""
    found, lines = [], path.read_text().splitlines()
    n = 0
    while n < len(lines):
        marker = _MARKER.match(lines[n].strip())
        if marker is None:
            if lines[n].strip().startswith("<!-- doc-test"):
                raise ValueError(f"{path.name}:{n + 1}: not a doc-test marker: {lines[n].strip()!r}")
            n += 1
            continue
        kind = marker.group(1) or "broker"
        if kind not in HARNESSES:
            raise ValueError(f"{path.name}:{n + 1}: no doc-test harness {kind!r} (there are {', '.join(HARNESSES)})")
        opening = _FENCE.match(lines[n + 1]) if n + 1 < len(lines) else None
        if opening is None:
            raise ValueError(f"{path.name}:{n + 1}: {MARKER} must be followed by a fenced block")
        indent, fence, language = opening.groups()
        body, m = [], n + 2
        while m < len(lines) and lines[m].strip() != fence:
            body.append(lines[m].removeprefix(indent))
            m += 1
        if m == len(lines):
            raise ValueError(f"{path.name}:{n + 2}: the fenced block is not closed")
        found.append(Block(path, n + 2, language or "sh", body, kind))
        n = m + 1
    return [block for block in found if harness is None or block.harness == harness]


def matches(expected: list[str], actual: list[str]) -> bool:
    """Line by line; a ``...`` line matches any number of lines, ``...`` in a line any text."""
    if not expected:
        return not actual
    head, rest = expected[0], expected[1:]
    if head.strip() == "...":
        return any(matches(rest, actual[k:]) for k in range(len(actual) + 1))
    if not actual or not _line_matches(head, actual[0]):
        return False
    return matches(rest, actual[1:])


def _line_matches(expected: str, actual: str) -> bool:
    # A run of two or more blanks is a column gap, as wide as the column's longest value on that machine.
    parts = [" {2,}".join(map(re.escape, re.split(r" {2,}", part))) for part in expected.rstrip().split("...")]
    return re.fullmatch(".*".join(parts), actual.rstrip()) is not None
