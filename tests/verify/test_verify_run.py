"""End-to-end verify runs: real worker processes (confluent-kafka) against an ``eoslog serve`` subprocess
behind the fault proxy, with every kind of fault, then the checker. A correct broker must come out with
zero anomalies; a broker with a test-only bug switched on must not."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from eoslog.testing.embedded import EmbeddedBroker
from eoslog.verify.cli import verify_command
from eoslog.verify.faults import ALL_KINDS
from eoslog.verify.history import read_history
from eoslog.verify.run import VerifyOptions, run_verify

# Short fault holds and gaps so that about 70 s see every kind of fault several times.
DENSE = {"fault_seconds": (0.5, 2.5), "quiet_seconds": (0.5, 2.0)}


def test_short_verify_run_under_every_fault_finds_no_anomalies(tmp_path):
    result = run_verify(VerifyOptions(duration=70, seed=20261121, out=tmp_path, **DENSE))
    text = result.render_text()
    assert result.valid, text
    assert result.report.errors == {}, text
    assert not result.problems, text
    assert result.final_read_complete, text

    # The run did real work under real faults: it is no proof if nothing happened.
    stats = result.report.stats
    assert stats["committed"] >= 150, text
    assert stats["aborted"] >= 15, text
    assert stats["values_read"] >= 150, text
    for kind in ALL_KINDS:
        assert result.faults.get(kind, 0) >= 3, (kind, result.faults)
    assert result.worker_exits.get("killed", 0) >= 3, result.worker_exits
    assert result.workers_started >= 3 + result.faults["client-kill"]

    # What it leaves behind: the history (with its final read), the report, the summary, the plot.
    events = read_history(result.history_path)
    assert any(e.final and e.type == "ok" for e in events)
    assert sum(1 for e in events if e.f == "crash") >= 3
    assert (tmp_path / "report.txt").read_text().startswith("exactly-once check: VALID")
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["valid"] and summary["committed"] == stats["committed"]
    assert result.plot_path is not None and result.plot_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    windows = json.loads((tmp_path / "faults.json").read_text())
    assert len(windows) == sum(result.faults.values())


def test_cli_against_a_running_broker_injects_client_crashes_only(tmp_path):
    with EmbeddedBroker() as broker:
        outcome = CliRunner().invoke(verify_command, [
            "--duration", "12", "--bootstrap", broker.bootstrap, "--seed", "7", "--out", str(tmp_path),
            "--workers", "2", "--quiet"])
    assert outcome.exit_code == 0, outcome.output
    assert "exactly-once check: VALID" in outcome.output
    assert f"output: {tmp_path}" in outcome.output
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert set(summary["faults"]) == {"client-kill"}
    assert summary["committed"] > 0 and summary["final_read_complete"]


def test_cli_refuses_broker_properties_for_an_external_broker():
    outcome = CliRunner().invoke(verify_command, ["--bootstrap", "127.0.0.1:9", "--broker-set", "a=b"])
    assert outcome.exit_code == 2
    assert "--broker-set" in outcome.output


def test_cli_refuses_unknown_fault_kinds():
    outcome = CliRunner().invoke(verify_command, ["--faults", "broker-kill,meteor"])
    assert outcome.exit_code == 2
    assert "meteor" in outcome.output


# --------------------------------------------------------------------------- injected broker bugs
# Each test-only switch breaks one exactly-once mechanism in the broker; the verifier must notice.


def test_disabled_duplicate_detection_is_reported_as_duplicates(tmp_path, monkeypatch):
    monkeypatch.setenv("EOSLOG_ALLOW_TEST_FAULTS", "1")
    # Dropped responses make clients retry batches the broker already appended.
    result = run_verify(VerifyOptions(
        duration=20, seed=3, out=tmp_path, faults=("proxy-drop",), fault_seconds=(3.0, 5.0),
        quiet_seconds=(0.2, 0.5), drop_rate=0.2, broker_properties={"eoslog.test.disable.duplicate.detection": "true"}))
    assert not result.valid
    assert result.report.errors.get("duplicate", 0) >= 1, result.render_text()
    example = result.report.examples["duplicate"][0]
    assert len(example["offsets"]) >= 2  # a batch retried twice sits at three offsets


def test_read_committed_past_the_lso_is_reported_as_aborted_and_precommitted_reads(tmp_path, monkeypatch):
    monkeypatch.setenv("EOSLOG_ALLOW_TEST_FAULTS", "1")
    outcome = CliRunner().invoke(verify_command, [
        "--duration", "10", "--seed", "4", "--out", str(tmp_path), "--faults", "", "--abort-rate", "0.3",
        "--broker-set", "eoslog.test.read.committed.past.lso=true", "--quiet"])
    assert outcome.exit_code == 1, outcome.output
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["faults_total"] == 0
    # Consumers see open transactions: records later aborted (G1a) and a transaction's own sends.
    assert summary["errors"].get("G1a", 0) >= 1, outcome.output
    assert summary["errors"].get("precommitted-read", 0) >= 1, outcome.output
    assert "verdict: INVALID" in outcome.output


def test_a_test_fault_switch_without_the_environment_variable_stops_the_run(tmp_path, monkeypatch):
    monkeypatch.delenv("EOSLOG_ALLOW_TEST_FAULTS", raising=False)
    with pytest.raises(RuntimeError, match="EOSLOG_ALLOW_TEST_FAULTS"):
        run_verify(VerifyOptions(duration=5, out=tmp_path, faults=(),
                                 broker_properties={"eoslog.test.read.committed.past.lso": "true"}))
