"""Shell completion from click (docs/operations.md "Shell completion"), through click's own protocol: the
shell calls `eoslog` with _EOSLOG_COMPLETE and COMP_WORDS/COMP_CWORD set and reads "type,value" lines."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def _eoslog(env: dict[str, str], code: str = "from eoslog.cli import main; main(prog_name='eoslog')"):
    return subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True,
                          text=True, timeout=60, check=False)


def _complete(words: str, code: str | None = None) -> subprocess.CompletedProcess:
    env = {"_EOSLOG_COMPLETE": "bash_complete", "COMP_WORDS": words, "COMP_CWORD": str(len(words.split(" ")) - 1)}
    return _eoslog(env) if code is None else _eoslog(env, code)


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_the_source_script_is_produced(shell):
    result = _eoslog({"_EOSLOG_COMPLETE": f"{shell}_source"})
    assert result.returncode == 0, result.stderr
    assert "_EOSLOG_COMPLETE" in result.stdout and "complete" in result.stdout


def test_python_m_eoslog_answers_as_eoslog():
    env = {**os.environ, "_EOSLOG_COMPLETE": "bash_complete", "COMP_WORDS": "eoslog se", "COMP_CWORD": "1"}
    result = subprocess.run([sys.executable, "-m", "eoslog"], env=env, capture_output=True, text=True, timeout=60,
                            check=False)
    assert result.stdout.splitlines() == ["plain,serve"]


def test_se_completes_to_serve_and_options_complete():
    assert _complete("eoslog se").stdout.splitlines() == ["plain,serve"]
    options = _complete("eoslog serve --data").stdout.splitlines()
    assert options == ["plain,--data-dir"]
    levels = _complete("eoslog serve --log-level w").stdout.splitlines()
    assert levels == ["plain,warning"]
    per_logger = _complete("eoslog serve --log-level eoslog.cluster=d").stdout.splitlines()
    assert per_logger == ["plain,eoslog.cluster=debug"]


def test_a_command_whose_extra_is_missing_is_left_out_not_a_crash():
    # A lazy command whose module needs the spark extra, with numpy missing: listing the commands
    # (what completing `eoslog ` does) must skip it rather than fail.
    code = ("import sys; sys.modules['numpy'] = None\n"
            "from eoslog.cli import LazyGroup, main\n"
            "LazyGroup.LAZY = {**LazyGroup.LAZY, 'spark-thing': 'eoslog.spark:register'}\n"
            "main(prog_name='eoslog')\n")
    result = _complete("eoslog ", code)
    assert result.returncode == 0, result.stderr
    offered = [line.split(",", 1)[1] for line in result.stdout.splitlines()]
    assert "serve" in offered and "pipeline" in offered and "spark-thing" not in offered
