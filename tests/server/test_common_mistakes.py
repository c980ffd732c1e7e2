"""The common mistakes at `eoslog serve` (issue 17, docs/operations.md "Common mistakes").

Each runs the real command (``python -m eoslog serve``) and asserts what an operator sees: one last line on
stderr that says what is wrong and how to fix it, exit code 1, and nothing half-started (the process
exits by itself, no port file, nothing created in the data directory).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from eoslog.log.data_dir_format import (
    CURRENT_FORMAT_VERSION,
    FORMAT_VERSION_FILE,
    check_or_record,
    parse,
    render,
)
from eoslog.log.errors import DataDirectoryError
from eoslog.server.config import BrokerConfig, ConfigError
from eoslog.testing.process import free_port


def _serve(*args: str, prefix: tuple[str, ...] = (), cwd: Path | None = None, env: dict[str, str] | None = None,
           interpreter_flags: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """`eoslog serve ARGS`; the timeout is the "it exits by itself" check (a started broker never would)."""
    return subprocess.run([*prefix, sys.executable, *interpreter_flags, "-m", "eoslog", "serve", *args],
                          check=False, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, cwd=cwd,
                          env=None if env is None else {**os.environ, **env})


def _last_line(result: subprocess.CompletedProcess) -> str:
    return result.stderr.strip().splitlines()[-1]


def test_a_port_in_use_is_one_line_and_touches_no_data_dir(tmp_path):
    data_dir, port_file = tmp_path / "data", tmp_path / "port"
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = _serve("--listen", f"127.0.0.1:{port}", "--data-dir", str(data_dir), "--port-file", str(port_file))
    assert result.returncode == 1
    assert _last_line(result) == (f"Error: port 127.0.0.1:{port} is in use (another broker?) — stop it or choose "
                                  "another --listen HOST:PORT")
    assert not data_dir.exists()  # not created, so no lock, meta.properties or format marker either
    assert not port_file.exists()


def _without_dac_override() -> tuple[str, ...]:
    """Root writes anywhere: the broker then runs as root without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH
    (util-linux's setpriv), so the file modes hold for it as for its owner. It keeps root's uid, so it can
    still read the interpreter and eoslog wherever they were installed: switching to user nobody could not
    (a clone in root's 0700 home or a `mktemp -d` directory gave "No module named eoslog", issue 40)."""
    return ("setpriv", "--bounding-set", "-dac_override,-dac_read_search") if os.geteuid() == 0 else ()


@pytest.mark.parametrize(("option", "expected"), [
    (("--listen", "127.0.0.1:70000"), "--listen: must be at most 65535, got 70000"),
    (("--listen", "127.0.0.1:99999"), "--listen: must be at most 65535, got 99999"),
    (("--set", "listeners=PLAINTEXT://127.0.0.1:70000"),
     "listeners: port 70000 is out of range (0-65535) in 'PLAINTEXT://127.0.0.1:70000'"),
    (("--metrics-listen", "127.0.0.1:65536"), "eoslog.metrics.listen: must be at most 65535, got 65536"),
])
def test_a_port_past_65535_is_refused_not_wrapped(tmp_path, option, expected):
    """The kernel takes a port modulo 65536: 70000 used to start a broker on 4464 (issue 40)."""
    result = _serve("--data-dir", str(tmp_path / "data"), *option)
    assert result.returncode == 1
    assert _last_line(result) == f"Error: configuration error: {expected}"
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("option", ["--metrics-listen", "--console-listen"])
def test_a_busy_metrics_or_console_port_is_one_line(tmp_path, option):
    data_dir, port_file = tmp_path / "data", tmp_path / "port"
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = _serve("--listen", "127.0.0.1:0", "--data-dir", str(data_dir), "--port-file", str(port_file),
                        option, f"127.0.0.1:{port}")
    assert result.returncode == 1
    assert _last_line(result) == (f"Error: port 127.0.0.1:{port} is in use (another broker?) — stop it or choose "
                                  f"another {option} HOST:PORT (eoslog.{option[2:].replace('-', '.')})")
    assert "Traceback" not in result.stderr
    assert not data_dir.exists()
    assert not port_file.exists()


@pytest.fixture(params=["installed", "copied under a 0700 directory"])
def eoslog_source(request, tmp_path_factory) -> dict[str, str] | None:
    """Where the broker imports eoslog from: as installed, or a copy of the source in a directory only its
    owner may enter (pytest's tmp dirs are 0700), with ``-S`` so that no .pth file points back at the
    checkout; the dependencies come from this interpreter's site-packages, named on PYTHONPATH."""
    if request.param == "installed":
        return None
    import click

    import eoslog

    private = tmp_path_factory.mktemp("clone")
    private.chmod(0o700)
    shutil.copytree(Path(eoslog.__file__).parent, private / "src" / "eoslog",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return {"PYTHONPATH": f"{private / 'src'}{os.pathsep}{Path(click.__file__).parents[1]}"}


def test_an_unwritable_data_dir_names_the_path_and_the_errno_text(tmp_path, eoslog_source):
    data_dir = tmp_path / "read-only"
    data_dir.mkdir(mode=0o555)
    data_dir.chmod(0o555)
    port_file = tmp_path / "port"
    interpreter_flags = ("-S",) if eoslog_source else ()
    result = _serve("--listen", f"127.0.0.1:{free_port()}", "--data-dir", str(data_dir),
                    "--port-file", str(port_file), prefix=_without_dac_override(), env=eoslog_source,
                    interpreter_flags=interpreter_flags)
    assert result.returncode == 1, result.stderr
    assert _last_line(result).startswith(f"Error: cannot use data dir {data_dir}: Permission denied (")
    assert _last_line(result).endswith("make it a directory this user can write, or choose another --data-dir")
    assert list(data_dir.iterdir()) == []
    assert not port_file.exists()


def test_a_data_dir_below_a_file_is_refused(tmp_path):
    (tmp_path / "a-file").write_text("x")
    data_dir = tmp_path / "a-file" / "data"
    result = _serve("--listen", "127.0.0.1:0", "--data-dir", str(data_dir))
    assert result.returncode == 1
    assert _last_line(result) == (f"Error: cannot use data dir {data_dir}: Not a directory ({data_dir}); make it "
                                  "a directory this user can write, or choose another --data-dir")


def test_a_data_dir_of_a_newer_format_version_is_refused_untouched(tmp_path):
    data_dir, port_file = tmp_path / "data", tmp_path / "port"
    data_dir.mkdir()
    (data_dir / FORMAT_VERSION_FILE).write_bytes(render(CURRENT_FORMAT_VERSION + 1))
    (data_dir / "topics.json").write_text("a layout this eoslog cannot read")
    before = sorted(p.name for p in data_dir.iterdir())
    result = _serve("--listen", "127.0.0.1:0", "--data-dir", str(data_dir), "--port-file", str(port_file))
    assert result.returncode == 1
    assert _last_line(result) == (f"Error: data dir {data_dir} was written by format version "
                                  f"{CURRENT_FORMAT_VERSION + 1}; this eoslog reads up to {CURRENT_FORMAT_VERSION}"
                                  " — upgrade eoslog")
    assert sorted(p.name for p in data_dir.iterdir()) == before  # no .lock, no meta.properties
    assert not port_file.exists()


def test_a_second_broker_on_the_same_data_dir_is_refused(tmp_path):
    from eoslog.testing.process import BrokerProcess

    first = BrokerProcess(data_dir=tmp_path / "data").start()
    try:
        port = free_port()
        result = _serve("--listen", f"127.0.0.1:{port}", "--data-dir", str(tmp_path / "data"))
        assert result.returncode == 1
        assert _last_line(result) == (
            f"Error: data directory {tmp_path / 'data'} is already in use (held by process {first.process.pid}): "
            f"another broker or LogDirectory holds the lock on {tmp_path / 'data' / '.lock'}; stop it or choose "
            "another data directory")
        assert first.process.poll() is None  # the first broker is untouched, and still serves
        socket.create_connection(("127.0.0.1", first.port), timeout=5).close()
    finally:
        assert first.terminate() == 0


@pytest.mark.parametrize("where", ["--set", "--config"])
def test_a_config_typo_names_the_property_it_meant(tmp_path, where):
    data_dir = tmp_path / "data"
    if where == "--set":
        source = ["--set", "log.retension.ms=60000"]
    else:
        (tmp_path / "server.properties").write_text("num.partitions=3\nlog.retension.ms=60000\n")
        source = ["--config", str(tmp_path / "server.properties")]
    result = _serve("--listen", "127.0.0.1:0", "--data-dir", str(data_dir), *source)
    assert result.returncode == 1
    assert _last_line(result) == ("Error: configuration error: unknown broker property 'log.retension.ms'; "
                                  "did you mean 'log.retention.ms'?")
    assert not data_dir.exists()


@pytest.mark.parametrize(("typo", "meant"), [
    ("num.partition", "num.partitions"),
    ("log.segment.byte", "log.segment.bytes"),
    ("transaction.max.timeout", "transaction.max.timeout.ms"),
    ("ssl.keystore.locaton", "ssl.keystore.location"),
    ("listener.name.external.ssl.keystore.pasword", "listener.name.external.ssl.keystore.password"),
])
def test_a_typo_suggests_the_known_name(typo, meant):
    with pytest.raises(ConfigError) as raised:
        BrokerConfig().set_property(typo, "1")
    assert str(raised.value) == f"unknown broker property {typo!r}; did you mean {meant!r}?"


def test_an_unknown_name_far_from_every_known_one_has_no_suggestion():
    with pytest.raises(ConfigError) as raised:
        BrokerConfig().set_property("frobnicate", "1")
    assert str(raised.value) == "unknown broker property 'frobnicate'"


def test_a_kafka_property_eoslog_does_not_implement_is_a_warning(caplog):
    config = BrokerConfig()
    with caplog.at_level(logging.WARNING, logger="eoslog.server.config"):
        config.set_property("num.io.threads", "8")
    # nothing is configured by it; it is kept as given, for DescribeConfigs to list with its note
    assert config.ignored_properties == {"num.io.threads": "8"} and not config.originals
    assert dataclasses.replace(config, ignored_properties={}) == BrokerConfig()
    assert [r.getMessage() for r in caplog.records] == [
        "ignoring num.io.threads=8: a Kafka broker property eoslog does not implement"]


def test_the_format_marker_is_written_once_and_read_back(tmp_path):
    data_dir = tmp_path / "data"
    assert check_or_record(data_dir) == CURRENT_FORMAT_VERSION
    marker = data_dir / FORMAT_VERSION_FILE
    assert marker.read_bytes() == b"eoslog.storage.format.version=1\n"
    assert parse(marker.read_text()) == CURRENT_FORMAT_VERSION
    # A directory from before the marker existed (any other file, no marker) is version 1, then marked.
    older = tmp_path / "older"
    older.mkdir()
    (older / "meta.properties").write_text("version=1\ncluster.id=x\nnode.id=0\n")
    assert check_or_record(older) == 1 and (older / FORMAT_VERSION_FILE).exists()
    marker.write_text("garbage")
    with pytest.raises(DataDirectoryError, match="records no format version"):
        check_or_record(data_dir)


def test_version_names_the_program():
    result = subprocess.run([sys.executable, "-m", "eoslog", "--version"], capture_output=True, text=True,
                            timeout=60, check=True)
    from importlib.metadata import version

    assert result.stdout.strip() == f"eoslog, version {version('eoslog')}"
