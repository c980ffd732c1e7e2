"""The known-bug check (issue 38): the checker must be able to fail. With transaction version 1 producers
that give up on an EndTxn and go on in the same epoch (verify/workload_v1.py), a late EndTxn replayed by
the fault proxy (``proxy-replay-endtxn``) ends whichever transaction is open when it lands, KIP-890 part
2's KAFKA-17754, and the run must be INVALID with exactly such late-write anomalies. The same fault
against version 2 producers (workload_v2.py, the same plan and the same give-up rule) must be VALID: the
EndTxn that ended the first transaction bumped the epoch, so the late one is fenced.

Each late EndTxn becomes visible only when it lands in an open transaction that goes on to add a new
partition and then decides the other way (docs/reliability.md, "The known-bug check"); 45 s hold about
seven of them, and every run on 2026-11-29 found at least one."""

from __future__ import annotations

import pytest

from eoslog.verify.run import VerifyOptions, run_verify

pytestmark = pytest.mark.slow

# What a late EndTxn of a version 1 producer can leave in a history (workload_v1's docstring).
LATE_END_TXN = {"G1a", "precommitted-read", "lost-write", "unseen", "poll-skip"}
COMMON = {"faults": ("proxy-replay-endtxn",), "client": "eoslog", "abort_rate": 0.5, "think_ms": 0.0,
          "partitions": 8, "fault_seconds": (0.2, 0.5), "quiet_seconds": (0.3, 0.8)}


def test_version_1_late_end_txns_are_found(tmp_path):
    result = run_verify(VerifyOptions(duration=45, seed=4, out=tmp_path, transaction_version=1, **COMMON))
    text = result.render_text()
    assert not result.valid, "a late EndTxn under transaction version 1 went unnoticed:\n" + text
    assert set(result.report.errors) <= LATE_END_TXN, text
    assert result.faults.get("proxy-replay-endtxn", 0) >= 5, result.faults
    assert result.final_read_complete, text


def test_version_2_fences_the_same_late_end_txns(tmp_path):
    result = run_verify(VerifyOptions(duration=30, seed=4, out=tmp_path, transaction_version=2, **COMMON))
    text = result.render_text()
    assert result.valid and result.report.errors == {}, text
    assert result.faults.get("proxy-replay-endtxn", 0) >= 3, result.faults
    assert result.final_read_complete, text
