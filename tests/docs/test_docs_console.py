"""docs/console.md's ``<!-- doc-test: console -->`` blocks run against what the page starts: an embedded
broker (the page's ``127.0.0.1:9092``) and ``eoslog console --bootstrap`` it as a process of its own,
read-only (``127.0.0.1:8080``). The page's blocks there use curl only: plain HTTP, no browser
(tests/console drives Chromium)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from doc_blocks import blocks
from doc_runner import DEFAULT_BOOTSTRAP, ROOT, run_blocks, shell_env, with_a_wrong_line

from eoslog.testing.embedded import EmbeddedBroker
from eoslog.tools.local.process import free_port

pytestmark = pytest.mark.interop
PAGE = ROOT / "docs/console.md"


@pytest.fixture(scope="module")
def console(tmp_path_factory):
    base = tmp_path_factory.mktemp("doc-console")
    with EmbeddedBroker(data_dir=base / "data") as broker:
        env = shell_env(tmp_path_factory.mktemp("doc-bin"), broker.bootstrap)
        port_file, address = base / "console.port", f"127.0.0.1:{free_port()}"
        with open(base / "console.log", "wb") as log:
            process = subprocess.Popen([sys.executable, "-m", "eoslog", "console", "--bootstrap", broker.bootstrap,
                                        "--listen", address, "--port-file", str(port_file)], env=env,
                                       stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while not port_file.exists():
                assert process.poll() is None and time.monotonic() < deadline, (base / "console.log").read_text()
                time.sleep(0.05)
            yield env, {DEFAULT_BOOTSTRAP: broker.bootstrap, "127.0.0.1:8080": address}
        finally:
            process.terminate()
            process.wait(timeout=30)


def test_the_console_page_runs_as_written(console, tmp_path):
    """One test, so one console; it also shows it can fail (a command with an output line changed)."""
    env, swaps = console
    page = blocks(PAGE, "console")
    run_blocks(page, env, tmp_path, swaps)
    with pytest.raises(AssertionError, match=r"console\.md:\d+: `curl -s -o /dev/null"):
        run_blocks([with_a_wrong_line(page[0], "curl -s -o")], env, tmp_path, swaps)
