"""``eoslog verify --cluster 3 --faults bitflip`` (issue 38, the short CI version): a random broker is
stopped, one bit of a stored batch of one of its replicas of the test topic is flipped, and it starts
again. The fetch CRC check keeps the damage from every reader and follower, and the replica, a follower
again, cuts its log at the damaged batch and fetches it again: the run finds no anomaly
(docs/durability.md, "Corruption")."""

from __future__ import annotations

import json

import pytest

from eoslog.verify.run import VerifyOptions, run_verify

pytestmark = pytest.mark.slow


def test_flipped_bits_in_replicas_are_never_read_and_are_repaired(tmp_path):
    result = run_verify(VerifyOptions(duration=30, seed=38, out=tmp_path, cluster=3, faults=("bitflip", "leader-kill"),
                                      quiet_seconds=(0.5, 1.5)))
    text = result.render_text()
    assert result.valid, text
    assert result.report.errors == {} and result.final_read_complete, text
    details = [w.detail for w in result.windows if w.kind == "bitflip"]
    assert len(details) >= 2 and all("restarted" in d for d in details), details
    # The first may come before the workers wrote anything to flip; later ones have batches to hit.
    assert sum(" bit " in d for d in details) >= 1, details


def test_a_single_node_refuses_its_flipped_batches_and_serves_the_rest(tmp_path):
    """``eoslog verify --faults bitflip`` on one broker: the only copy is damaged, so the flipped batch's
    records are gone. The broker must refuse exactly that batch (the workers and the final read step over
    it) and serve everything else: VALID once the checker excuses the offsets faults.json names, and any
    damaged byte served would be an unwritten read or an inconsistent offset."""
    result = run_verify(VerifyOptions(duration=20, seed=38, out=tmp_path, faults=("bitflip",),
                                      quiet_seconds=(1.0, 2.0)))
    text = result.render_text()
    assert result.valid, text
    assert result.report.errors == {} and result.final_read_complete, text
    damaged = [w.damaged for w in result.windows if w.kind == "bitflip" and w.damaged]
    assert len(damaged) >= 2, [w.detail for w in result.windows]
    assert {"SIGTERM", "SIGKILL"} <= {w.detail.split(",")[0] for w in result.windows if w.kind == "bitflip"}
    faults_json = json.loads((tmp_path / "faults.json").read_text())
    assert [tuple(map(tuple, f["damaged"])) for f in faults_json if f["damaged"]] == damaged
    # The final read reached every damaged batch and was refused there (at least once per batch).
    assert "refusing to serve" in (tmp_path / "broker.log").read_text(errors="replace")
