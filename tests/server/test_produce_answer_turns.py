"""An acks=all Produce with fsync on ack is answered in the loop turn that completes its flush round.

Before, the answer crossed four loop turns after the round's syncfs (or fsync) returned: the group
commit's future, the Produce answer future, the encoded response future, the write; on a loop serving
many clients each turn is tens of milliseconds (docs/benchmarks.md, "Issue 16 on a quiet machine"). Now
the partitions' callbacks, the Produce answer and the encoded response run inside the round's completion
(eoslog/eager_future.py); the write follows when the delivery ends, one per connection for a round's
responses (tests/server/test_answers_written_in_the_round.py).
Real broker, real producer; the test watches what is ready when a round's completion returns."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from eoslog.log.flusher import GroupCommit
from eoslog.server.dispatcher import Dispatcher
from eoslog.server.network import KafkaConnection
from eoslog.testing.embedded import EmbeddedBroker


@pytest.mark.parametrize("syncfs", [True, False])
def test_responses_are_ready_when_the_round_completion_returns(monkeypatch, syncfs):
    inside = {"rounds": 0, "round": False, "ready_inside": 0, "ready_outside": 0}
    completion = "_round_finished" if syncfs else "_finished"
    original = getattr(GroupCommit, completion)

    def completing(self, *args):
        inside["round"] = True
        try:
            return original(self, *args)
        finally:
            inside["round"] = False
            inside["rounds"] += 1

    chain = Dispatcher._chain  # handlers that answer with a future: here only acks=all Produce
    produce_answers = set()

    def chained(self, *args):
        out = chain(self, *args)
        produce_answers.add(id(out))
        return out

    ready = KafkaConnection._on_response_ready

    def on_response_ready(self, entry, future):
        if id(future) in produce_answers:
            inside["ready_inside" if inside["round"] else "ready_outside"] += 1
        return ready(self, entry, future)

    monkeypatch.setattr(GroupCommit, completion, completing)
    monkeypatch.setattr(Dispatcher, "_chain", chained)
    monkeypatch.setattr(KafkaConnection, "_on_response_ready", on_response_ready)
    with EmbeddedBroker(properties={"eoslog.log.flush.syncfs": str(syncfs).lower()}) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("t", 4, 1)])["t"].result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "acks": "all",
                             "linger.ms": 0})
        delivered = []
        for i in range(200):
            producer.produce("t", b"v%d" % i, partition=i % 4, on_delivery=lambda err, msg: delivered.append(err))
            producer.poll(0)
        assert producer.flush(30) == 0
        assert delivered == [None] * 200
        assert broker.broker.registry.log_directory.group_commit.uses_syncfs == syncfs
    # Every acks=all Produce waited for a round, and each of their responses became ready inside a round's
    # completion, not at a later turn of the loop.
    assert inside["rounds"] > 0
    assert inside["ready_inside"] > 0
    assert inside["ready_outside"] == 0
