"""The verifier with transaction version 2 clients (workload_v2.py: eoslog's KIP-890 part 2 producer)
and its "delay and replay" fault (proxy-replay): a Produce or EndTxn held past the client's timeout and
forwarded after it has moved on must never land in, or end, a later transaction."""

from __future__ import annotations

import json
import time

import pytest

from eoslog.verify.faults import CUT_SHORT, Nemesis
from eoslog.verify.history import read_history
from eoslog.verify.run import VerifyOptions, run_verify


def test_short_verify_run_with_version_2_clients_under_delay_and_replay_finds_no_anomalies(tmp_path):
    # ~20 s: the acceptance run, short. Each replay holds a request for 5 s or more.
    result = run_verify(VerifyOptions(
        duration=16, seed=20261125, out=tmp_path, transaction_version=2,
        faults=("proxy-replay", "broker-kill", "client-kill"), fault_seconds=(0.3, 1.0), quiet_seconds=(0.3, 1.0)))
    text = result.render_text()
    assert result.valid, text
    assert result.report.errors == {}, text
    assert not result.problems, text
    assert result.final_read_complete, text
    stats = result.report.stats
    assert stats["committed"] >= 50 and stats["aborted"] >= 5, text
    assert result.faults.get("proxy-replay", 0) >= 1, result.faults
    replays = [w for w in result.windows if w.kind == "proxy-replay"]
    assert all(w.detail.startswith("held 1 request") for w in replays), replays
    # Each replay held its request 5 s or more, unless the end of the run cut it short (a loaded machine
    # can push the last one there); at least one was whole.
    whole = [w for w in replays if not w.detail.endswith(f"({CUT_SHORT})")]
    assert whole and all(w.end - w.start >= 5.0 for w in whole), replays
    events = read_history(result.history_path)
    assert any(e.type == "ok" and e.f == "txn" for e in events)
    assert json.loads((tmp_path / "summary.json").read_text())["valid"]


class _HoldingProxy:
    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.held = 0

    def hold_requests(self, *keys, count=None):
        self.calls.append(("hold", keys, count))
        self.held += 1

    def release_requests(self):
        self.calls.append(("release",))

    def snapshot(self):
        return {"requests_held": self.held}

    def set_faults(self, **rates):
        pass

    paused = False


def test_the_replay_fault_holds_the_next_produce_or_end_txn_and_releases_it():
    proxy = _HoldingProxy()
    nemesis = Nemesis(["proxy-replay"], seed=3, proxy=proxy, fault_seconds=(0.0, 0.0), quiet_seconds=(0.0, 0.0))
    nemesis.replay_min_hold_s = 0.0
    nemesis._inject("proxy-replay")
    assert proxy.calls[:2] == [("hold", (0, 26), 1), ("release",)]
    (window,) = nemesis.windows
    assert window.kind == "proxy-replay" and window.detail.startswith("held 1 request")
    nemesis.heal()
    assert proxy.calls[-1] == ("release",) and len(proxy.calls) == 2  # nothing left held: no second release


def test_a_replay_the_end_of_the_run_interrupts_says_so_and_how_long_it_held():
    proxy = _HoldingProxy()
    nemesis = Nemesis(["proxy-replay"], seed=3, proxy=proxy, fault_seconds=(0.0, 0.0), quiet_seconds=(0.0, 0.0))
    nemesis._stop.set()  # the run is over before the 5 s hold could pass
    nemesis._inject("proxy-replay")
    (window,) = nemesis.windows
    assert window.detail.endswith(f"({CUT_SHORT})"), window
    assert window.end - window.start < 5.0 and "for 0.0 s" in window.detail, window
    assert proxy.calls[-1] == ("release",)  # and the held request went on


class _ArmedProxy(_HoldingProxy):
    """Holding is armed by hold_requests; a request is held when the test says so (``held += 1``)."""

    def hold_requests(self, *keys, count=None):
        self.calls.append(("hold", keys, count))


def test_the_forced_replay_releases_only_once_the_worker_waits_for_a_held_end_txn():
    """The forced schedule (faults.py): a late-wait said before the proxy held anything is not about the
    held request and releases nothing; the one said after the hold releases it, and the fault lasts
    until the worker says how that transaction ended."""
    import threading

    proxy = _ArmedProxy()
    nemesis = Nemesis(["proxy-replay-endtxn"], seed=3, proxy=proxy, forced_replays=1,
                      fault_seconds=(0.0, 0.0), quiet_seconds=(0.0, 0.0))
    nemesis.worker_said("late-wait", ["Produce: no answer"])  # before the fault: dropped
    runner = threading.Thread(target=nemesis._run)
    runner.start()
    deadline = time.monotonic() + 5
    while not proxy.calls and time.monotonic() < deadline:
        time.sleep(0.01)
    nemesis.worker_said("late-wait", ["Produce: no answer"])  # a slow Produce, the proxy holds nothing
    time.sleep(0.5)
    assert proxy.calls == [("hold", (26,), 1)], proxy.calls  # not released
    proxy.held += 1  # now the EndTxn is held
    nemesis.worker_said("late-wait", ["EndTxn: no answer"])
    deadline = time.monotonic() + 5
    while ("release",) not in proxy.calls and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proxy.calls[-1] == ("release",), proxy.calls
    assert not nemesis.finished.is_set()
    nemesis.worker_said("late-answered", ["EndTxn: NONE"])
    nemesis.worker_said("late-done", "fail")
    runner.join(5)
    assert nemesis.finished.is_set()
    (window,) = nemesis.windows
    assert window.detail.startswith("held 1 request(s)"), window
    assert window.detail.endswith("late answer EndTxn: NONE; that transaction: fail"), window


def test_the_forced_replay_schedule_injects_the_end_txn_replay_alone():
    with pytest.raises(ValueError, match="alone"):
        Nemesis(["proxy-replay-endtxn", "client-kill"], seed=3, proxy=_HoldingProxy(), kill_client=lambda: None,
                forced_replays=1)
