"""The queue checker's core (verify/queue_checker.py) on hand-written histories: valid ones, and one or
more histories per anomaly that must be judged INVALID."""

from __future__ import annotations

import json

import pytest

from eoslog.verify.queue_checker import ANOMALIES, QueueHistoryError, check
from eoslog.verify.queue_workload import produce_outcome


class Q:
    """A queue history, line by line."""

    def __init__(self, limit: int = 5) -> None:
        self.lines: list[dict] = []
        self.add("runner", "ok", "config", {"delivery_count_limit": limit, "partitions": 2})

    def add(self, process, type_, f, value=None) -> Q:
        line = {"index": len(self.lines), "time": 1000.0 + len(self.lines), "process": process, "type": type_, "f": f}
        if value is not None:
            line["value"] = value
        self.lines.append(line)
        return self

    def produce(self, partition, value, offset=None) -> Q:
        if offset is None:
            return self.add(1, "info", "produce", [partition, value])
        return self.add(1, "ok", "produce", [partition, value, offset])

    def deliver(self, process, *records) -> Q:
        """records: (partition, offset, value, count)."""
        return self.add(process, "ok", "deliver", [list(r) for r in records])

    def ack(self, process, *acks, status=None) -> Q:
        """acks: (partition, offset, value, count, kind); status: partition -> ok/fail/info (None: no
        completion line)."""
        self.add(process, "invoke", "ack", [list(a) for a in acks])
        if status is not None:
            self.add(process, "ok", "ack", {str(p): s for p, s in status.items()})
        return self

    def take(self, process, partition, offset, value, count, kind, status="ok") -> Q:
        """One delivery, acknowledged."""
        return (self.deliver(process, (partition, offset, value, count))
                .ack(process, (partition, offset, value, count, kind), status={partition: status}))

    def final(self, **ends) -> Q:
        """ends: p<n>=(start, end)."""
        return self.add("runner", "ok", "final", {k[1:]: list(v) for k, v in ends.items()})

    def check(self):
        return check(self.lines)


def test_a_clean_history_is_valid():
    h = Q().produce(0, 1, 0).produce(0, 2, 1).produce(1, 3, 0).produce(1, 4, 1)
    h.take(10, 0, 0, 1, 1, "accept").take(11, 0, 1, 2, 1, "release").take(10, 0, 1, 2, 2, "accept")
    h.take(11, 1, 0, 3, 1, "reject").take(11, 1, 1, 4, 1, "accept")
    report = h.final(p0=(2, 2), p1=(2, 2)).check()
    assert report.valid, report.render_text()
    assert report.stats["finished"] == {"accepted": 3, "rejected": 1}
    assert "queue check: VALID" in report.render_text()


def test_a_record_never_finished_is_lost_once_the_group_is_done_with_it():
    h = Q().produce(0, 1, 0).produce(0, 2, 1)
    h.take(10, 0, 0, 1, 1, "accept")
    report = h.final(p0=(2, 2)).check()
    assert not report.valid
    assert report.anomalies == {"lost": 1}
    assert report.examples["lost"][0]["offset"] == 1
    assert "ERROR lost: 1" in report.render_text()


def test_lost_is_not_judged_without_a_complete_final_drain():
    h = Q().produce(0, 1, 0).produce(0, 2, 1).take(10, 0, 0, 1, 1, "accept")
    assert h.check().valid  # no final drain
    h = Q().produce(0, 1, 0).produce(0, 2, 1).take(10, 0, 0, 1, 1, "accept").final(p0=(1, 2))
    report = h.check()
    assert report.valid and report.stats["finished"]["unknown (final drain incomplete)"] == 1


def test_an_accept_whose_answer_was_lost_or_that_was_refused():
    # unknown (info, or no completion at all): it may have been applied, so the record is not lost
    for h in (Q().produce(0, 1, 0).take(10, 0, 0, 1, 1, "accept", status="info").final(p0=(1, 1)),
              Q().produce(0, 1, 0).deliver(10, (0, 0, 1, 1)).ack(10, (0, 0, 1, 1, "accept")).final(p0=(1, 1))):
        assert h.check().valid
    # refused (fail): nothing was applied, so it must be accepted again, or it is lost
    h = Q().produce(0, 1, 0).take(10, 0, 0, 1, 1, "accept", status="fail").final(p0=(1, 1))
    assert h.check().anomalies == {"lost": 1}
    h = (Q().produce(0, 1, 0).take(10, 0, 0, 1, 1, "accept", status="fail")
         .take(11, 0, 0, 1, 2, "accept").final(p0=(1, 1)))
    assert h.check().valid


def test_a_crash_leaves_the_pending_acknowledgement_unknown():
    h = (Q().produce(0, 1, 0).deliver(10, (0, 0, 1, 1)).ack(10, (0, 0, 1, 1, "accept"))
         .add(10, "info", "crash").final(p0=(1, 1)))
    report = h.check()
    assert report.valid and report.stats["finished"] == {"maybe accepted": 1}


def test_accepted_twice_and_delivered_again_after_an_accept():
    h = Q().produce(0, 1, 0).take(10, 0, 0, 1, 1, "accept").take(11, 0, 0, 1, 2, "accept").final(p0=(1, 1))
    assert h.check().anomalies == {"accepted-twice": 1, "redelivered-after-accept": 1}
    h = Q().produce(0, 1, 0).take(10, 0, 0, 1, 1, "accept").deliver(11, (0, 0, 1, 2))
    assert h.check().anomalies == {"redelivered-after-accept": 1}


def test_an_accept_that_only_may_have_happened_allows_a_later_delivery():
    h = (Q().produce(0, 1, 0).take(10, 0, 0, 1, 1, "accept", status="info")
         .take(11, 0, 0, 1, 2, "accept").final(p0=(1, 1)))
    assert h.check().valid


def test_a_rejected_record_delivered_again():
    h = Q().produce(0, 1, 0).take(10, 0, 0, 1, 1, "reject").deliver(11, (0, 0, 1, 2))
    assert h.check().anomalies == {"redelivered-after-reject": 1}


def test_the_delivery_limit():
    h = Q(limit=3).produce(0, 97, 0)
    for count in (1, 2, 3):
        h.take(10, 0, 0, 97, count, "release")
    assert h.final(p0=(1, 1)).check().valid  # archived at the limit
    h.take(10, 0, 0, 97, 4, "release")
    assert h.check().anomalies == {"delivery-limit": 1}


def test_a_record_whose_last_delivery_may_be_unrecorded_counts_as_archived():
    # released at limit - 1; the delivery at the limit nobody recorded (a lost answer) archived it
    h = Q(limit=3).produce(0, 97, 0).take(10, 0, 0, 97, 1, "release").take(10, 0, 0, 97, 2, "release")
    report = h.final(p0=(1, 1)).check()
    assert report.valid and report.stats["finished"] == {"archived": 1}


def test_a_released_record_that_never_comes_back():
    h = Q().produce(0, 1, 0).take(10, 0, 0, 1, 1, "release").final(p0=(1, 1))
    assert h.check().anomalies == {"lost": 1, "release-not-redelivered": 1}
    # ... and one that comes back only as far as someone accepting it without the record of a delivery
    h = Q().produce(0, 1, 0).take(10, 0, 0, 1, 1, "release").ack(11, (0, 0, 1, 2, "accept"), status={0: "ok"})
    assert h.final(p0=(1, 1)).check().valid


def test_one_acquisition_handed_out_twice():
    h = Q().produce(0, 1, 0).deliver(10, (0, 0, 1, 1)).deliver(11, (0, 0, 1, 1))
    assert h.check().anomalies == {"repeated-delivery-count": 1}


def test_deliveries_of_values_never_sent_or_at_the_wrong_offset():
    h = Q().produce(0, 1, 0).deliver(10, (0, 0, 2, 1))
    assert h.check().anomalies == {"unwritten-delivery": 1, "inconsistent-offset": 1}
    # a produce that ended in an error, or never reported (its producer killed), may still be in the log
    h = Q().produce(0, 5).deliver(10, (0, 3, 5, 1))
    assert h.check().valid
    h = Q().add(1, "invoke", "produce", [0, 6]).deliver(10, (0, 3, 6, 1))
    assert h.check().valid


def test_every_anomaly_has_a_description_and_bad_lines_are_refused():
    assert set(ANOMALIES) == {"lost", "accepted-twice", "redelivered-after-accept", "redelivered-after-reject",
                              "delivery-limit", "release-not-redelivered", "repeated-delivery-count",
                              "unwritten-delivery", "inconsistent-offset",
                              "output-without-accept", "accept-without-output", "output-twice"}
    with pytest.raises(QueueHistoryError):
        check(Q().add(10, "ok", "nonsense").lines)
    with pytest.raises(QueueHistoryError):
        check(Q().ack(10, (0, 0, 1, 1, "maybe"), status={0: "ok"}).lines)
    with pytest.raises(QueueHistoryError, match="without its offset"):
        check(Q().add(1, "ok", "produce", [2, 7, None]).lines)


def test_a_delivery_report_without_an_offset_is_recorded_as_may_be_in_the_log():
    """librdkafka reported a successful delivery with no offset once, in a cluster run under leader kills;
    the workload records it as info (the record may be in the log, at an offset nobody knows)."""
    assert produce_outcome(None, 2, 7, 31) == ("ok", "produce", [2, 7, 31])
    assert produce_outcome(None, 2, 7, None) == ("info", "produce", [2, 7])
    assert produce_outcome(None, 2, 7, -1001) == ("info", "produce", [2, 7])  # librdkafka's invalid offset
    assert produce_outcome("an error", 2, 7, None) == ("info", "produce", [2, 7])
    type_, f, value = produce_outcome(None, 0, 7, None)
    assert Q().add(1, type_, f, value).deliver(10, (0, 3, 7, 1)).check().valid


def test_a_history_file(tmp_path):
    h = Q().produce(0, 1, 0).take(10, 0, 0, 1, 1, "accept").final(p0=(1, 1))
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in h.lines))
    assert check(path).valid
