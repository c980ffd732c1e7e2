"""The doc-test convention (issue 40): a fenced block in README.md or docs/ that follows the line
``<!-- doc-test -->`` is run by tests/docs/test_docs.py, so a doc that drifts from the code fails the suite.
The comment does not show when the Markdown is rendered; everything else about the block stays as a reader
expects it.

- A shell block is a transcript: ``$ COMMAND`` (continued by a trailing backslash) and the output the
  command prints, stdout and stderr together, up to the next ``$``. A line ``...`` stands for any number of
  lines, and ``...`` inside a line for any text (a timestamp). Commands run in bash, in document order, all
  the blocks of one file in one temporary directory, against the broker the test provides.
- A ``python`` block runs as it is written, its blocks of one file in one namespace.

The tools' default address, 127.0.0.1:9092, is the test broker's: the ``eoslog`` on the commands' PATH is a
shim that runs eoslog's CLI with ``--bootstrap-server`` set to it (tests/docs/test_docs.py). Blocks of
different files share the broker, so each file uses topic and group names of its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

MARKER = "<!-- doc-test -->"
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

    @property
    def where(self) -> str:
        return f"{self.path.name}:{self.line}"

    def commands(self) -> list[Command]:
        """The transcript's commands with their expected output; a block with no ``$`` line is an error,
        so a marked block can never be skipped by accident."""
        commands: list[Command] = []
        continuing = False
        for offset, line in enumerate(self.lines, start=self.line + 1):
            if continuing:
                commands[-1].text += "\n" + line
                continuing = line.endswith("\\")
            elif line.startswith("$ "):
                commands.append(Command(line[2:], line=offset))
                continuing = line.endswith("\\")
            elif commands:
                commands[-1].expected.append(line)
            elif line.strip():
                raise ValueError(f"{self.where}: output before the first `$ ` command: {line!r}")
        if not commands:
            raise ValueError(f"{self.where}: a doc-test shell block with no `$ ` command")
        return commands


def blocks(path: Path) -> list[Block]:
    """The marked fenced blocks of one Markdown file, in order."""
    found, lines = [], path.read_text().splitlines()
    n = 0
    while n < len(lines):
        if lines[n].strip() != MARKER:
            n += 1
            continue
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
        found.append(Block(path, n + 2, language or "sh", body))
        n = m + 1
    return found


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
    if "..." not in expected:
        return expected.rstrip() == actual.rstrip()
    pattern = ".*".join(re.escape(part) for part in expected.rstrip().split("..."))
    return re.fullmatch(pattern, actual.rstrip()) is not None
