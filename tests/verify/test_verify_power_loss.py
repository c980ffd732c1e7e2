"""``eoslog verify --faults power-loss`` (issue 38, the short CI version): the single broker's data
directory on LazyFS, SIGKILLed again and again with every unsynced write dropped or torn, and started on
what survived. With fsync on acknowledgement (the single-node default) the history is VALID; acknowledging
before the fsync (``log.eoslog.fsync.on.ack=false``, the planted bug) must be reported."""

from __future__ import annotations

import os

import pytest

from eoslog.faults.lazyfs import unavailable_reason
from eoslog.verify.run import VerifyOptions, run_verify

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def fuse():
    reason = unavailable_reason()
    if reason is not None:
        if os.path.exists("/dev/fuse"):
            pytest.fail(f"/dev/fuse is there, yet LazyFS cannot mount: {reason}")
        pytest.skip(reason)


def test_power_losses_with_fsync_on_ack_lose_nothing(tmp_path):
    result = run_verify(VerifyOptions(duration=25, seed=3802, out=tmp_path, faults=("power-loss", "client-kill")))
    text = result.render_text()
    assert result.valid, text
    assert result.report.errors == {}, text
    assert result.final_read_complete, text
    assert result.faults.get("power-loss", 0) >= 3, result.faults
    assert result.report.stats["committed"] >= 50, text
    details = [w.detail for w in result.windows if w.kind == "power-loss"]
    assert any("torn" in d for d in details) and any("dropped" in d for d in details), details
    assert all("restarted" in d for d in details), details
    assert not os.path.ismount(tmp_path / "mnt")  # unmounted at the end


def test_acknowledging_before_the_fsync_is_reported_under_power_loss(tmp_path):
    result = run_verify(VerifyOptions(duration=20, seed=7, out=tmp_path, faults=("power-loss",),
                                      broker_properties={"log.eoslog.fsync.on.ack": "false"}))
    assert not result.valid, result.render_text()
    assert {"lost-write", "unseen"} & set(result.report.errors), result.render_text()
