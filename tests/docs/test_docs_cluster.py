"""docs/cluster.md's ``<!-- doc-test: cluster -->`` blocks run against the cluster the page tells a reader to
start: ``eoslog cluster up --brokers 3 --dir /tmp/c`` (Debian's ZooKeeper and three `eoslog serve`
processes), started once here; the page's ``/tmp/c``, ``127.0.0.1:9092`` (broker 1) and ``127.0.0.1:2181``
(ZooKeeper) stand for this one's."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest
from doc_blocks import blocks
from doc_runner import DEFAULT_BOOTSTRAP, ROOT, run_blocks, shell_env, with_a_wrong_line

pytestmark = pytest.mark.interop
PAGE = ROOT / "docs/cluster.md"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    base = tmp_path_factory.mktemp("doc-cluster")
    directory, out = base / "c", base / "up.out"
    env = shell_env(tmp_path_factory.mktemp("doc-bin"), "unused")
    with open(out, "wb") as sink:
        process = subprocess.Popen([sys.executable, "-m", "eoslog", "cluster", "up", "--brokers", "3", "--dir",
                                    str(directory)], stdout=sink, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, env=env)
    try:
        deadline = time.monotonic() + 120
        while "(Ctrl-C stops the cluster)" not in out.read_text():
            assert process.poll() is None and time.monotonic() < deadline, out.read_text()
            time.sleep(0.1)
        status = subprocess.run([sys.executable, "-m", "eoslog", "cluster", "status", "--dir", str(directory),
                                 "--json"], env=env, capture_output=True, text=True, check=True)
        members = {(m["role"], m["id"]): m for m in json.loads(status.stdout)}
        bootstrap = members[("broker", 1)]["address"]
        yield {"env": {**env, "EOSLOG_DOC_TEST_BOOTSTRAP": bootstrap},
               "swaps": {"/tmp/c": str(directory), DEFAULT_BOOTSTRAP: bootstrap,
                         "127.0.0.1:2181": members[("zookeeper", 1)]["address"]}}
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=150)


def test_the_cluster_page_runs_as_written(cluster, tmp_path):
    """One test, so one cluster (a second test could land on another xdist worker and start its own). It
    first shows it can fail: the page's first block with a line changed."""
    page = blocks(PAGE, "cluster")
    with pytest.raises(AssertionError, match=r"cluster\.md:\d+: `eoslog cluster status"):
        run_blocks([with_a_wrong_line(page[0])], cluster["env"], tmp_path, cluster["swaps"])
    run_blocks(page, cluster["env"], tmp_path, cluster["swaps"])
