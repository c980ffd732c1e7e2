"""The Produce answers a flush round makes ready are written within the round's delivery.

With fsync on ack, a round's delivery settles every acks=all Produce it covered (test_produce_answer_turns.py).
Their writes used to wait for the loop's next turn, which under load is every readable socket's requests,
tens of milliseconds. Now they are written when the delivery returns (eoslog/eager_future.py,
``batched``), still one write per connection. Real broker, real producer; the test watches what is written
during deliveries.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from eoslog.log import flusher
from eoslog.server.dispatcher import Dispatcher
from eoslog.server.network import KafkaConnection
from eoslog.testing.embedded import EmbeddedBroker

PRODUCE = 0
RECORDS = 50


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

    chain = Dispatcher._chain  # a handler that answered with a future: here only acks=all Produce

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
    with EmbeddedBroker(properties={"eoslog.log.flush.syncfs": str(syncfs).lower()}) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("t", 4, 1)])["t"].result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "acks": "all",
                             "linger.ms": 0})
        delivered = []
        for i in range(RECORDS):  # one request each: every one waits for a round of its own
            producer.produce("t", b"v%d" % i, partition=i % 4, on_delivery=lambda err, msg: delivered.append(err))
            assert producer.flush(30) == 0
        assert delivered == [None] * RECORDS
    produce = [inside for api, inside in written if api == PRODUCE]
    assert len(produce) == RECORDS, f"{len(produce)} of {RECORDS} acks=all Produce requests waited for a round"
    assert all(produce), f"{produce.count(False)} of {len(produce)} Produce answers were written after their round's delivery"
