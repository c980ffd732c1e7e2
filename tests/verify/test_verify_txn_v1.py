"""The known-bug check (issue 38): the checker must be able to fail. With transaction version 1 producers
that give up on an EndTxn and go on in the same epoch (verify/workload_v1.py), a late EndTxn replayed by
the fault proxy (``proxy-replay-endtxn``) ends whichever transaction is open when it lands, KIP-890 part
2's KAFKA-17754, and the run must be INVALID with exactly such late-write anomalies. The same schedule
against version 2 producers (workload_v2.py, the same plan and the same give-up rule) must be VALID: the
EndTxn that ended the first transaction bumped the epoch, so the late one is fenced.

No chance in it: the forced schedule (VerifyOptions.schedule="late-end-txn", docs/reliability.md, "The
known-bug check") releases each held EndTxn once the worker's next transaction holds a write, and that
transaction decides the other way; the first replay is a late commit, the second a late abort."""

from __future__ import annotations

import pytest

from eoslog.verify.run import VerifyOptions, run_verify

pytestmark = pytest.mark.slow

# What a late EndTxn of a version 1 producer can leave in a history (workload_v1's docstring).
LATE_END_TXN = {"G1a", "precommitted-read", "lost-write", "unseen", "poll-skip"}
FORCED = {"faults": ("proxy-replay-endtxn",), "schedule": "late-end-txn", "forced_replays": 2, "workers": 1,
          "client": "eoslog", "partitions": 4, "think_ms": 0.0, "quiet_seconds": (0.2, 0.4), "duration": 90}


def _replays(result) -> list[str]:
    windows = [w.detail for w in result.windows if w.kind == "proxy-replay-endtxn"]
    assert len(windows) == 2 and all(d.startswith("held 1 request(s)") for d in windows), windows
    return windows


def test_version_1_late_end_txns_are_found(tmp_path):
    result = run_verify(VerifyOptions(seed=4, out=tmp_path, transaction_version=1, **FORCED))
    text = result.render_text()
    assert not result.valid, "a late EndTxn under transaction version 1 went unnoticed:\n" + text
    # The late commit landed in a transaction that then aborted, the late abort in one that committed.
    first, second = _replays(result)
    assert "late answer EndTxn: NONE; that transaction: fail" in first, first
    assert "late answer EndTxn: NONE; that transaction: ok" in second, second
    errors = result.report.errors
    assert set(errors) <= LATE_END_TXN, text
    # The aborted transaction's first write was committed under it (a reader saw it); the committed
    # transaction's first write was aborted under it (no reader did).
    assert errors.get("G1a", 0) >= 1, text
    assert errors.get("lost-write", 0) + errors.get("unseen", 0) >= 1, text
    assert result.final_read_complete, text


def test_version_2_fences_the_same_late_end_txns(tmp_path):
    result = run_verify(VerifyOptions(seed=4, out=tmp_path, transaction_version=2, **FORCED))
    text = result.render_text()
    assert result.valid and result.report.errors == {}, text
    # The same schedule ran: each late EndTxn reached the broker inside the next transaction, was
    # refused (the epoch moved on), and that transaction decided the other way.
    first, second = _replays(result)
    for detail, outcome in ((first, "fail"), (second, "ok")):
        assert "late answer EndTxn: " in detail and "late answer EndTxn: NONE" not in detail, detail
        assert detail.endswith(f"that transaction: {outcome}"), detail
    assert result.final_read_complete, text
