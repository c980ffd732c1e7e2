"""``eoslog verify --cluster 3 --faults power-loss[-all]`` (issue 38, short CI versions): every broker's
data directory on LazyFS, and acknowledgement without fsync (``log.eoslog.fsync.on.ack=false``, the
setting docs/durability.md recommends for replicated clusters). One broker losing power loses nothing
acknowledged: the other replicas of the ISR still hold it. Every broker losing power at once can lose
acknowledged records, and the verifier must say so."""

from __future__ import annotations

import os

import pytest

from eoslog.faults.lazyfs import unavailable_reason
from eoslog.verify.run import VerifyOptions, run_verify

pytestmark = pytest.mark.slow

NO_FSYNC = {"log.eoslog.fsync.on.ack": "false"}


@pytest.fixture(autouse=True)
def fuse():
    reason = unavailable_reason()
    if reason is not None:
        if os.path.exists("/dev/fuse"):
            pytest.fail(f"/dev/fuse is there, yet LazyFS cannot mount: {reason}")
        pytest.skip(reason)


def test_one_broker_losing_power_loses_nothing_acknowledged_with_rf_3(tmp_path):
    result = run_verify(VerifyOptions(duration=15, seed=5, out=tmp_path, cluster=3, faults=("power-loss",),
                                      broker_properties=NO_FSYNC, quiet_seconds=(0.5, 1.5)))
    text = result.render_text()
    assert result.valid, text
    assert result.report.errors == {} and result.final_read_complete, text
    assert result.faults.get("power-loss", 0) >= 2, result.faults
    details = [w.detail for w in result.windows if w.kind == "power-loss"]
    assert all("restarted" in d and "file(s)" in d for d in details), details
    assert not any(os.path.ismount(tmp_path / "cluster" / f"broker-{i}") for i in (1, 2, 3))


def test_every_broker_losing_power_at_once_is_reported(tmp_path):
    result = run_verify(VerifyOptions(duration=10, seed=5, out=tmp_path, cluster=3, faults=("power-loss-all",),
                                      broker_properties=NO_FSYNC, quiet_seconds=(0.5, 1.5)))
    assert not result.valid, result.render_text()
    assert {"lost-write", "unseen"} & set(result.report.errors), result.render_text()
