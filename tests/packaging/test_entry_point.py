"""The `eoslog` entry point (eoslog/__main__.py): it switches the garbage collector off for start-up, and every
command but `serve` switches it back on before running (serve does after freezing its start-up objects, which
tests/server/test_gc_policy.py checks on a real broker process; test_wheel_install.py checks the console script is this entry point)."""

from __future__ import annotations

import subprocess
import sys

import pytest

# Reports, as the process exits, whether the collector was on while the command ran.
PROBE = """\
import atexit, gc, sys
atexit.register(lambda: print("collector on:", gc.isenabled()))
sys.argv = ["eoslog", *sys.argv[1:]]
from eoslog.__main__ import main
main()
"""


@pytest.mark.parametrize("command", [["topics", "--help"], ["records", "--help"]])
def test_other_commands_run_with_the_collector_on(command):
    done = subprocess.run([sys.executable, "-c", PROBE, *command], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("collector on: True"), done.stdout

