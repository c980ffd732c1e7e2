"""The queue checker's transactional mode (verify/queue_txn_checker.py) on hand-written histories: a
worker's transaction ACCEPTs its inputs and writes one output each; the output topic read with
read_committed at the end. Valid histories, and INVALID ones for each transactional anomaly."""

from __future__ import annotations

import pytest

from eoslog.verify.queue_checker import QueueHistoryError

from .test_queue_checker import Q


class T(Q):
    """Q with transactions and the final output read."""

    def __init__(self, limit: int = 5) -> None:
        super().__init__(limit)
        self.ids: dict = {}

    def txn(self, process, *records, outcome="ok", end=None, acknowledged=True, deliver=True) -> T:
        """records: (partition, offset, value, count); outcome ok/fail/info/None (no completion line)."""
        if deliver:
            self.deliver(process, *records)
        n = self.ids[process] = self.ids.get(process, 0) + 1
        self.add(process, "invoke", "txn", {"id": n, "records": [list(r) for r in records]})
        if outcome == "fail":
            self.add(process, "fail", "txn", {"id": n, "acknowledged": acknowledged})
        elif outcome == "info":
            self.add(process, "info", "txn", {"id": n, "end": end})
        elif outcome == "ok":
            self.add(process, "ok", "txn", {"id": n})
        return self

    def outputs(self, *outs, complete=True) -> T:
        """outs: (input partition, input offset, value, process, txn id)."""
        records = [[0, i, p, o, v, w, t] for i, (p, o, v, w, t) in enumerate(outs)]
        return self.add("runner", "ok", "outputs", {"complete": complete, "records": records})


def test_committed_and_aborted_transactions_that_keep_the_promise():
    h = T().produce(0, 1, 0).produce(0, 2, 1).produce(1, 3, 0)
    h.txn(10, (0, 0, 1, 1), (0, 1, 2, 1))                     # committed: both outputs visible
    h.txn(11, (1, 0, 3, 1), outcome="fail")                    # aborted on purpose: the input comes back
    h.txn(12, (1, 0, 3, 2), outcome="info", end="commit")      # answer lost, output visible: committed
    h.final(p0=(2, 2), p1=(1, 1)).outputs((0, 0, 1, 10, 1), (0, 1, 2, 10, 1), (1, 0, 3, 12, 1))
    report = h.check()
    assert report.valid, report.render_text()
    assert report.stats["finished"] == {"accepted": 3}
    assert report.stats["transactions"] == {"committed": 1, "aborted": 1, "committed (inferred from its output)": 1}
    assert "3 outputs visible to read_committed" in report.render_text()


def test_a_worker_killed_inside_its_transaction():
    # killed after the invoke: the outcome unknown, no output visible, so it aborted and the input came back
    h = T().produce(0, 1, 0).txn(10, (0, 0, 1, 1), outcome=None).add(10, "info", "crash")
    h.txn(11, (0, 0, 1, 2)).final(p0=(1, 1)).outputs((0, 0, 1, 11, 1))
    report = h.check()
    assert report.valid, report.render_text()
    assert report.stats["transactions"]["aborted (inferred from its output)"] == 1
    assert report.stats["transactions"]["open when its worker died"] == 1


def test_output_visible_from_an_aborted_transaction():
    h = T().produce(0, 1, 0).txn(10, (0, 0, 1, 1), outcome="fail").txn(11, (0, 0, 1, 2))
    report = h.final(p0=(1, 1)).outputs((0, 0, 1, 10, 1), (0, 0, 1, 11, 1)).check()
    assert report.anomalies == {"output-without-accept": 1, "output-twice": 1}, report.render_text()
    assert report.examples["output-without-accept"][0]["why"] == "its transaction was aborted"
    # the worker asked for the abort; the answer was lost, but its output shows
    h = T().produce(0, 1, 0).txn(10, (0, 0, 1, 1), outcome="info", end="abort").txn(11, (0, 0, 1, 2))
    report = h.final(p0=(1, 1)).outputs((0, 0, 1, 10, 1), (0, 0, 1, 11, 1)).check()
    assert report.anomalies["output-without-accept"] == 1


def test_output_whose_input_someone_else_accepted_or_got_again():
    # a member's own ACCEPT of the same record succeeded, and the committed transaction's output shows
    h = T().produce(0, 1, 0).take(20, 0, 0, 1, 1, "accept").txn(10, (0, 0, 1, 2))
    report = h.final(p0=(1, 1)).outputs((0, 0, 1, 10, 1)).check()
    assert report.anomalies == {"output-without-accept": 1, "accepted-twice": 1, "redelivered-after-accept": 1}
    assert "accepted by process 20" in report.examples["output-without-accept"][0]["why"]
    # the transaction's answer was lost, its output shows; the input was handed out again afterwards
    h = T().produce(0, 1, 0).txn(10, (0, 0, 1, 1), outcome="info", end="commit").deliver(20, (0, 0, 1, 2))
    report = h.final(p0=(1, 1)).outputs((0, 0, 1, 10, 1)).check()
    assert report.anomalies == {"output-without-accept": 1, "redelivered-after-accept": 1}
    assert "delivered again" in report.examples["output-without-accept"][0]["why"]


def test_accepted_inputs_without_output():
    # committed, but one of its two outputs is missing
    h = T().produce(0, 1, 0).produce(0, 2, 1).txn(10, (0, 0, 1, 1), (0, 1, 2, 1))
    report = h.final(p0=(2, 2)).outputs((0, 0, 1, 10, 1)).check()
    assert report.anomalies == {"accept-without-output": 1}, report.render_text()
    assert report.examples["accept-without-output"][0]["offset"] == 1
    # the answer lost: one output shows, so it committed, and the other is missing all the same
    h = T().produce(0, 1, 0).produce(0, 2, 1).txn(10, (0, 0, 1, 1), (0, 1, 2, 1), outcome="info", end="commit")
    assert h.final(p0=(2, 2)).outputs((0, 1, 2, 10, 1)).check().anomalies == {"accept-without-output": 1}
    # without a complete read of the output topic, outputs are not judged
    h = T().produce(0, 1, 0).txn(10, (0, 0, 1, 1))
    assert h.final(p0=(1, 1)).outputs(complete=False).check().valid
    assert h.check().stats["outputs_read"] is False


def test_an_output_visible_twice():
    h = T().produce(0, 1, 0).txn(10, (0, 0, 1, 1))
    report = h.final(p0=(1, 1)).outputs((0, 0, 1, 10, 1), (0, 0, 1, 10, 1)).check()
    assert report.anomalies == {"output-twice": 1}


def test_two_committed_transactions_accepting_one_input():
    h = T().produce(0, 1, 0).txn(10, (0, 0, 1, 1)).txn(11, (0, 0, 1, 1), deliver=False)
    report = h.final(p0=(1, 1)).outputs((0, 0, 1, 10, 1), (0, 0, 1, 11, 1)).check()
    assert {"accepted-twice", "output-twice", "output-without-accept"} <= set(report.anomalies), report.render_text()


def test_an_aborted_transactions_input_must_come_back_with_its_delivery_count_kept():
    # aborted after its ACCEPTs were held: the input never delivered again, though the group is done
    h = T().produce(0, 1, 0).txn(10, (0, 0, 1, 1), outcome="fail").final(p0=(1, 1)).outputs()
    assert h.check().anomalies == {"release-not-redelivered": 1, "lost": 1}
    # ... the same inferred from the output: the worker killed, nothing of it visible
    h = T().produce(0, 1, 0).txn(10, (0, 0, 1, 1), outcome=None).final(p0=(1, 1)).outputs()
    assert h.check().anomalies == {"release-not-redelivered": 1, "lost": 1}
    # it came back with its delivery count reset to 1
    h = T().produce(0, 1, 0).txn(10, (0, 0, 1, 1), outcome="fail").txn(11, (0, 0, 1, 1))
    report = h.final(p0=(1, 1)).outputs((0, 0, 1, 11, 1)).check()
    assert "repeated-delivery-count" in report.anomalies
    # an abort whose acknowledgement had failed: the records may still have been the member's (info)
    h = T().produce(0, 1, 0).txn(10, (0, 0, 1, 1), outcome="fail", acknowledged=False).final(p0=(1, 1)).outputs()
    assert h.check().anomalies == {"lost": 1}


def test_an_output_of_no_transaction_and_bad_lines():
    h = T().produce(0, 1, 0).take(20, 0, 0, 1, 1, "accept").txn(10, (0, 0, 1, 2), outcome="fail")
    report = h.deliver(21, (0, 0, 1, 3)).outputs((0, 0, 1, 99, 7)).check()
    assert report.anomalies["output-without-accept"] == 1
    assert report.examples["output-without-accept"][0]["why"] == "no such transaction in the history"
    with pytest.raises(QueueHistoryError):
        T().add(10, "invoke", "txn", {"id": 1, "records": [[0, 0]]}).check()
    with pytest.raises(QueueHistoryError):
        T().add("runner", "ok", "outputs", {"complete": True, "records": [[0, 0, 0]]}).check()
