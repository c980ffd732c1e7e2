"""``eoslog verify --workload queue`` (issue 37), short CI versions: producers and confluent-kafka 2.16
ShareConsumers (explicit acknowledgement), half of them transactional workers (eoslog's ShareTxnProducer:
an output per input and the ACCEPTs in one transaction), against one broker behind its fault proxy, and
against a 3-broker cluster on a real ZooKeeper, under the nemesis; then the final drain, the output
topic read with read_committed, and the queue checker. A correct broker comes out VALID; the checker's
own ability to fail is in test_queue_checker.py and test_queue_txn_checker.py, and brokers that forget
acknowledgements or apply an ABORT marker as a COMMIT are documented in docs/verification.md ("The queue
workload")."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from eoslog.verify.cli import verify_command
from eoslog.verify.faults import ALL_KINDS
from eoslog.verify.queue_run import run_queue_verify
from eoslog.verify.run import VerifyOptions

DENSE = {"fault_seconds": (0.5, 2.0), "quiet_seconds": (0.5, 1.5)}

pytestmark = pytest.mark.slow


def _assert_exercised(result) -> None:
    text = result.render_text()
    assert result.valid, text
    assert result.final_read_complete, text
    stats = result.report.stats
    assert stats["produced"] >= 200, text
    finished = stats["finished"]
    assert finished["accepted"] >= 100 and finished["rejected"] >= 1 and finished["archived"] >= 1, text
    assert stats["acks"]["release ok"] >= 1, text
    # every share partition done by the broker's own account: start offset at the high watermark
    assert stats["partitions_done"] == 4, text


def _assert_transactional(stats: dict, text: str, *, died: bool = True) -> None:
    """The transactional workers committed, aborted on purpose, died inside transactions (SIGKILL after
    their ACCEPTs, before EndTxn), and the output topic was read to its end: every committed input's
    output is there once (the checker's verdict), and there are outputs to judge."""
    txns = stats["transactions"]
    assert stats["outputs_read"] and stats["outputs_visible"] >= 50, text
    assert txns["committed"] >= 20 and txns["aborted"] >= 2, text
    if died:
        assert txns["open when its worker died"] >= 1, text
        assert txns["aborted (inferred from its output)"] >= 1, text
    assert stats["acks"]["txn accept ok"] >= 50, text


def test_queue_verify_on_one_broker_under_its_faults(tmp_path):
    result = run_queue_verify(VerifyOptions(duration=25, seed=37, out=tmp_path, workers=4, **DENSE))
    _assert_exercised(result)
    _assert_transactional(result.report.stats, result.render_text())
    for kind in ALL_KINDS:
        assert result.faults.get(kind, 0) >= 1, (kind, result.faults)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["workload"] == "queue" and summary["valid"] and summary["outputs_read"]


def test_queue_verify_on_a_cluster_through_the_cli(tmp_path):
    outcome = CliRunner().invoke(verify_command, [
        "--workload", "queue", "--cluster", "3", "--duration", "30", "--seed", "3737", "--workers", "4",
        "--faults", "leader-kill,coordinator-kill,session-expiry,client-kill", "--out", str(tmp_path), "--quiet"])
    assert outcome.exit_code == 0, outcome.output
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["valid"] and summary["final_drain_complete"], summary
    assert summary["produced"] >= 200 and summary["finished"]["accepted"] >= 100, summary
    # the transactional workers too: their outputs read to the end with read_committed, each judged
    assert summary["outputs_read"] and summary["outputs_visible"] >= 50, summary
    assert summary["transactions"].get("committed", 0) >= 5, summary
    assert summary["faults"].get("leader-kill", 0) >= 1 and summary["faults"].get("coordinator-kill", 0) >= 1, summary
    # the coordinator faults aim at this group's group coordinator or its share coordinators
    windows = json.loads((tmp_path / "faults.json").read_text())
    aimed = [w["detail"] for w in windows if w["kind"] in ("coordinator-kill", "session-expiry")]
    assert aimed and all("eoslog-verify-queue" in d or d.startswith("no ") or "leader" in d for d in aimed), aimed
    assert any("share coordinator" in d or "group coordinator" in d for d in aimed), aimed


def test_cli_refuses_the_queue_workload_with_an_external_broker_or_other_fault_kinds():
    outcome = CliRunner().invoke(verify_command, ["--workload", "queue", "--bootstrap", "127.0.0.1:9"])
    assert outcome.exit_code == 2 and "--workload queue" in outcome.output
    outcome = CliRunner().invoke(verify_command, ["--workload", "queue", "--faults", "power-loss"])
    assert outcome.exit_code != 0 and "queue" in outcome.output
