"""`eoslog serve` without click (server/serve_command.py, issue 36): the entry point parses a plain `serve`
command line itself and hands everything else to click. These tests hold the two parses equal -- the fast
one either gives exactly the keyword arguments click's parse gives, or declines -- over the command's
declared options and a table of command lines, and check that errors come out as click's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

from eoslog import cli
from eoslog.server import serve_command
from eoslog.server.serve_command import DEFAULTS, OPTIONS, parse_serve_args

SRC = str(Path(serve_command.__file__).resolve().parents[2])


def click_parse(args: list[str]) -> dict | None:
    """click's keyword arguments for `eoslog serve ARGS`, or None where click refuses them (or prints help)."""
    try:
        context = cli.serve.make_context("serve", list(args), parent=click.Context(cli.main, info_name="eoslog"))
    except (click.exceptions.Exit, click.ClickException):
        return None
    return context.params


def test_the_fast_parse_knows_every_option_click_declares():
    declared = {}
    for param in cli.serve.params:
        for name in param.opts:
            declared[name] = param
    assert set(declared) - {"--help"} == set(OPTIONS)
    for option, param in declared.items():
        if option == "--help":
            continue
        assert OPTIONS[option] == param.name, option
        assert (option in serve_command.FLAGS) == param.is_flag, option
        assert (option in serve_command.MULTIPLE) == param.multiple, option
        assert (option in serve_command.PATHS) == isinstance(param.type, click.Path), option
        assert (option in serve_command.INTEGERS) == isinstance(param.type, click.types.IntParamType), option
        assert (option in serve_command.CHOICES) == isinstance(param.type, click.Choice), option
        if option in serve_command.PATHS:
            _, must_exist, dir_okay = serve_command.PATHS[option]
            assert (must_exist, dir_okay, param.type.file_okay, param.type.readable) == \
                (param.type.exists, param.type.dir_okay, True, True), option
            assert not (param.type.writable or param.type.executable or param.type.resolve_path
                        or param.type.allow_dash), option
        if option in serve_command.CHOICES:
            assert serve_command.CHOICES[option][1] == tuple(param.type.choices), option
    assert click_parse([]) == DEFAULTS


@pytest.fixture
def paths(tmp_path):
    (tmp_path / "broker.properties").write_text("num.partitions=3\n")
    (tmp_path / "a-dir").mkdir()
    return tmp_path


# (arguments after `serve`, whether the fast parse takes them); {tmp} is a directory holding
# broker.properties (a file) and a-dir (a directory).
CASES = [
    ([], True),
    (["--data-dir", "{tmp}/data", "--listen", "127.0.0.1:0", "--port-file", "{tmp}/port"], True),
    (["--data-dir={tmp}/data", "--listen=127.0.0.1:0", "--port-file={tmp}/port"], True),
    (["--data-dir", "{tmp}/a-dir"], True),
    (["--data-dir", "{tmp}/broker.properties"], True),  # click.Path: a file is fine where directories are
    (["--set", "num.partitions=3", "--set", "log.retention.ms=-1", "--set=a=b"], True),
    (["--log-level", "debug", "--log-level", "eoslog.cluster=warning"], True),
    (["--log-level", "loud"], False),
    (["--log-level", "=debug"], False),
    (["--log-format", "json"], True),
    (["--log-format", "JSON"], False),
    (["--log-format", "yaml"], False),
    (["--broker-id", "3"], True),
    (["--broker-id", " 3"], True),
    (["--broker-id", "x"], False),
    (["--broker-id", "-1"], False),  # a value starting with '-': left to click, which takes it
    (["--broker-id", "x", "--broker-id", "2"], False),
    (["--zookeeper", "localhost:2181/eoslog", "--advertised-listener", "broker:9092"], True),
    (["--metrics-listen", "127.0.0.1:0", "--console-listen", "127.0.0.1:0", "--console-allow-writes",
      "--console-command-config", "client.properties", "--schema-registry-listen", "https://127.0.0.1:0"], True),
    (["--console-allow-writes", "--console-allow-writes"], True),
    (["--console-allow-writes=true"], False),
    (["--config", "{tmp}/broker.properties"], True),
    (["--config", "{tmp}/missing.properties"], False),
    (["--config", "{tmp}/a-dir"], False),
    (["--port-file", "{tmp}/a-dir"], False),
    (["--port-file", "{tmp}/broker.properties"], True),
    (["--listen", "127.0.0.1:1", "--listen", "127.0.0.1:2"], True),  # the last one wins, as in click
    (["--listen"], False),
    (["--listen", "--port-file", "p"], False),
    (["--listen", ""], False),
    (["--listen="], False),
    (["--help"], False),
    (["--listen", "127.0.0.1:0", "--help"], False),
    (["-h"], False),
    (["--lsiten", "127.0.0.1:0"], False),
    (["--list", "127.0.0.1:0"], False),  # click takes no abbreviations either
    (["extra"], False),
    (["--", "--listen", "x"], False),
    (["--data-dir", "-"], False),
]


@pytest.mark.parametrize(("args", "taken"), CASES, ids=[" ".join(a) or "(none)" for a, _ in CASES])
def test_the_fast_parse_equals_clicks_or_declines(paths, args, taken):
    args = [a.replace("{tmp}", str(paths)) for a in args]
    fast = parse_serve_args(args)
    assert (fast is not None) == taken, fast
    if fast is not None:
        assert fast == click_parse(args)


def test_shell_completion_goes_to_click(monkeypatch):
    monkeypatch.setenv("_EOSLOG_COMPLETE", "bash_complete")
    assert parse_serve_args([]) is None


def _run(command: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": SRC}
    env.pop("_EOSLOG_COMPLETE", None)
    return subprocess.run(command, check=False, capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)


CLICK_ONLY = "import sys; from eoslog.cli import main; sys.argv[0] = 'eoslog'; main(prog_name='eoslog')"


@pytest.mark.parametrize("args", [
    ["--set", "num.partitions=many"],      # a configuration error: ServeError, click's "Error: ..." and exit 1
    ["--set", "num.partitions"],           # --set without NAME=VALUE
    ["--listen", "nohost"],                 # a bad HOST:PORT
    ["--bogus"],                            # click's usage error (exit 2), the fast parse declined
    ["--log-level", "loud"],                # a bad parameter, with the usage line
    ["--help"],
])
def test_the_command_answers_as_click_does(tmp_path, args):
    """The same stdout, stderr and exit code from `python -m eoslog serve ...` (the fast path where it
    takes the command line) as from click parsing and running the same command."""
    args = ["--data-dir", str(tmp_path / "data"), *args]
    fast = _run([sys.executable, "-m", "eoslog", "serve", *args], tmp_path)
    through_click = _run([sys.executable, "-c", CLICK_ONLY, "serve", *args], tmp_path)
    assert (fast.returncode, fast.stdout, fast.stderr) == \
        (through_click.returncode, through_click.stdout, through_click.stderr)
    assert fast.returncode != 0 or args[-1] == "--help"
