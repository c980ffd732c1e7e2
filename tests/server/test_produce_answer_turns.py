"""An acks=all Produce with fsync on ack is answered in the loop turn that completes its flush round.

Before, the answer crossed four loop turns after the round's syncfs (or fsync) returned: the group
commit's future, the Produce answer future, the encoded response future, the write; on a loop serving
many clients each turn is tens of milliseconds (docs/benchmarks.md, "Issue 16 on a quiet machine"). Now
the partitions' callbacks, the Produce answer and the encoded response run inside the round's completion
(eoslog/log/eager_future.py). The write used to wait for the loop's next turn; it now follows when the
round's delivery ends (``batched``), still one write per connection for what a round made ready.
Real broker, real producer; the tests watch what is ready, and what is written, while a round completes."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from eoslog.log import flusher
from eoslog.log.flusher import GroupCommit
from eoslog.server.dispatcher import Dispatcher
from eoslog.server.network import KafkaConnection
from eoslog.testing.embedded import EmbeddedBroker

PRODUCE = 0  # its api key
RECORDS = 50


def _produce(syncfs: bool, records: int, one_at_a_time: bool) -> None:
    """``records`` acks=all records to 4 partitions of a fresh broker, each request alone or as they come."""
    with EmbeddedBroker(properties={"eoslog.log.flush.syncfs": str(syncfs).lower()}) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("t", 4, 1)])["t"].result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "acks": "all",
                             "linger.ms": 0})
        delivered = []
        for i in range(records):
            producer.produce("t", b"v%d" % i, partition=i % 4, on_delivery=lambda err, msg: delivered.append(err))
            if one_at_a_time:
                assert producer.flush(30) == 0
            else:
                producer.poll(0)
        assert producer.flush(30) == 0
        assert delivered == [None] * records
        assert broker.broker.registry.log_directory.group_commit.uses_syncfs == syncfs


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

    chain = Dispatcher._chain  # every answer that comes later: a future (acks=all Produce) or a coroutine's task
    produce_answers = set()

    def chained(self, handler, context, *args):
        out = chain(self, handler, context, *args)
        if context.header.api_key == PRODUCE:
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
    _produce(syncfs, 200, one_at_a_time=False)
    # Every acks=all Produce waited for a round, and each of their responses became ready inside a round's
    # completion, not at a later turn of the loop.
    assert inside["rounds"] > 0
    assert inside["ready_inside"] > 0
    assert inside["ready_outside"] == 0


@pytest.mark.parametrize("syncfs", [True, False])
def test_produce_answers_are_written_inside_the_round_delivery(monkeypatch, syncfs):
    state = {"delivering": False}
    written: list[tuple[int, bool]] = []  # (api, written inside a delivery) of each answer that waited
    waited: dict[int, int] = {}  # id(answer future) -> api key
    entries: dict[int, int] = {}  # id(connection's pending entry) -> api key

    deliver = flusher._deliver

    def delivering(outcomes):
        state["delivering"] = True
        try:
            return deliver(outcomes)
        finally:
            state["delivering"] = False

    chain = Dispatcher._chain  # every answer that comes later; the Produce ones are picked below

    def chained(self, handler, context, *args):
        out = chain(self, handler, context, *args)
        waited[id(out)] = context.header.api_key
        return out

    ready = KafkaConnection._on_response_ready

    def on_response_ready(self, entry, future):
        if id(future) in waited:
            entries[id(entry)] = waited.pop(id(future))
        return ready(self, entry, future)

    drain = KafkaConnection._drain_ready

    def drain_ready(self):
        for entry in self._pending:  # what this drain writes: the ready entries at the head
            if entry[0] is None:
                break
            api = entries.pop(id(entry), None)
            if api is not None:
                written.append((api, state["delivering"]))
        return drain(self)

    monkeypatch.setattr(flusher, "_deliver", delivering)
    monkeypatch.setattr(Dispatcher, "_chain", chained)
    monkeypatch.setattr(KafkaConnection, "_on_response_ready", on_response_ready)
    monkeypatch.setattr(KafkaConnection, "_drain_ready", drain_ready)
    _produce(syncfs, RECORDS, one_at_a_time=True)  # one request each: every one waits for a round
    produce = [inside for api, inside in written if api == PRODUCE]
    assert len(produce) == RECORDS, f"{len(produce)} of {RECORDS} acks=all Produce requests waited for a round"
    assert all(produce), f"{produce.count(False)} of {len(produce)} Produce answers were written after their round's delivery"
