"""The docs run as written (issue 40): every block marked ``<!-- doc-test -->`` in README.md and docs/
(tests/docs/doc_blocks.py has the convention) runs against one embedded broker shared by the module, and
a command whose output differs from the transcript, or a Python block that raises, fails here. Blocks
that name another harness (``<!-- doc-test: cluster -->`` and the others) run in test_docs_HARNESS.py."""

from __future__ import annotations

import pytest
from doc_blocks import HARNESSES, blocks
from doc_runner import DEFAULT_BOOTSTRAP, ROOT, run_blocks, shell_env

from eoslog.testing.embedded import EmbeddedBroker

DOCS = ["README.md", "docs/operations.md", "docs/cluster.md", "docs/security.md", "docs/console.md",
        "docs/spark.md", "docs/transactions.md"]

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("doc-broker") / "data") as started:
        yield started.bootstrap


@pytest.fixture(scope="module")
def env(tmp_path_factory, broker):
    return shell_env(tmp_path_factory.mktemp("doc-bin"), broker)


def test_every_listed_doc_exists_and_every_harness_has_its_test():
    assert all((ROOT / doc).is_file() for doc in DOCS)
    tests = {path.stem.removeprefix("test_docs_") for path in (ROOT / "tests/docs").glob("test_docs_*.py")}
    assert set(HARNESSES) - {"broker"} <= tests


def test_the_pages_of_each_harness_have_marked_blocks():
    """A harness without a page to run would be a test that checks nothing."""
    kinds = {block.harness for doc in DOCS for block in blocks(ROOT / doc)}
    assert kinds == set(HARNESSES)


@pytest.mark.parametrize("doc", [doc for doc in DOCS if blocks(ROOT / doc, "broker")])
def test_the_doc_runs_as_written(doc, broker, env, tmp_path):
    run_blocks(blocks(ROOT / doc, "broker"), env, tmp_path, {DEFAULT_BOOTSTRAP: broker})
