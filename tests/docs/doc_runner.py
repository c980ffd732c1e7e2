"""Running a page's marked blocks (tests/docs/doc_blocks.py has the convention) against what a harness
started: the ``eoslog`` shim on the commands' PATH, and the page's addresses and paths swapped for the
harness's own.

A harness gives a ``{as the page shows it: the harness's own}`` map (``127.0.0.1:9092`` → the broker it
started, ``/tmp/c`` → its cluster directory). The commands and Python blocks run with the harness's values;
their output is read back with the page's values, so a transcript shows what a reader sees on their own
machine with the defaults.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from doc_blocks import Block, matches

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"

# `eoslog` on the commands' PATH: eoslog's own CLI in this interpreter. A command that takes a bootstrap
# option and names none gets the harness's broker, as the tools' default 127.0.0.1:9092 would be on the
# reader's machine. Commands that start servers or run for minutes are refused: the harness starts those.
SHIM = textwrap.dedent('''\
    #!{python}
    import os
    import sys

    import click

    args = sys.argv[1:]
    if args[:1] in (["serve"], ["console"], ["pipeline"], ["verify"], ["bench"], ["demo"]) or args[:2] == ["cluster", "up"]:
        sys.exit(f"doc-test: `eoslog {{' '.join(args[:2])}}` is started by the harness, not by a marked block")
    from eoslog.cli import main

    command, words, context = main, list(args), None
    while isinstance(command, click.Group) and words and not words[0].startswith("-"):
        context = click.Context(command, parent=context, info_name=words[0])
        found = command.get_command(context, words.pop(0))
        if found is None:
            break
        command = found
    bootstrap_options = {{"-b", "--bootstrap", "--bootstrap-server"}}
    takes = any(isinstance(p, click.Option) and bootstrap_options & set(p.opts) for p in command.params)
    if takes and not any(arg.split("=")[0] in bootstrap_options for arg in args):
        args += ["--bootstrap-server", os.environ["EOSLOG_DOC_TEST_BOOTSTRAP"]]
    main(args, prog_name="eoslog")
''')


def shell_env(bin_dir: Path, bootstrap: str, **extra: str) -> dict[str, str]:
    shim = bin_dir / "eoslog"
    shim.write_text(SHIM.format(python=sys.executable))
    shim.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "EOSLOG_DOC_TEST_BOOTSTRAP": bootstrap,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")])),
            "COLUMNS": "1000", "NO_COLOR": "1", **extra}


def _swap(text: str, pairs: dict[str, str]) -> str:
    # longest first, so 127.0.0.1:9092 is not half-replaced by a shorter key
    for old in sorted(pairs, key=len, reverse=True):
        text = text.replace(old, pairs[old])
    return text


def run_blocks(doc_blocks: list[Block], env: dict[str, str], cwd: Path, swaps: dict[str, str],
               timeout: float = 120) -> None:
    """Run the blocks in order; a command whose output differs from its transcript, or a Python block that
    raises, fails with the page's line."""
    back = {ours: theirs for theirs, ours in swaps.items()}
    state = cwd / ".doc-test-shell"
    namespace = {"__name__": "__doc_test__"}
    try:
        _run(doc_blocks, env, cwd, swaps, back, state, namespace, timeout)
    finally:
        namespace.clear()  # the page's clients go now, before the harness stops what they talk to


def _run(doc_blocks, env, cwd, swaps, back, state, namespace, timeout) -> None:
    for block in doc_blocks:
        if block.language == "python":
            source = _swap("\n".join(block.lines), swaps)
            with contextlib.chdir(cwd):  # the page's relative paths (certs/ca.pem) are the commands' too
                exec(compile(source, block.where, "exec"), namespace)  # noqa: S102 -- the doc's own code
            continue
        for command in block.commands():
            # One shell session per page: what a command sets (B="...") is there for the next ones.
            script = (f"set -a; . {state} 2>/dev/null\n{_swap(command.text, swaps)}\n"
                      f"status=$?; export -p > {state}; exit $status")
            done = subprocess.run(["bash", "-c", script], cwd=cwd, env=env, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout, check=False)
            actual = _swap(done.stdout, back).splitlines()
            assert matches(command.expected, actual), (
                f"{block.path.name}:{command.line}: `{command.text}` printed (exit status {done.returncode})\n"
                + "\n".join(actual) + "\n\nwhere the doc shows\n" + "\n".join(command.expected))


def with_a_wrong_line(block: Block, starting: str = "") -> Block:
    """One command of the block, as a doc that drifted would have it: the first whose text starts with
    ``starting`` and that shows output, with its last output line changed. Each harness's test runs it to
    show that the page's test can fail."""
    command = next((c for c in block.commands() if c.text.startswith(starting) and c.expected), None)
    assert command is not None, f"{block.where}: no command {starting!r}... shows output to get wrong"
    first = command.line - block.line - 1
    last = first + command.text.count("\n") + len(command.expected)
    lines = block.lines[first:last + 1]
    assert lines[-1] == command.expected[-1]
    lines[-1] += " (drifted)"
    return Block(block.path, command.line - 1, block.language, lines, block.harness)
