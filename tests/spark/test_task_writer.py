"""The sink task's produce loop with a stand-in producer (pure, no broker)."""

from __future__ import annotations

import pytest

from eoslog.spark.task_writer import _produce_all


class FullQueueProducer:
    """Raises BufferError on every ``every``-th call, as librdkafka does when its local queue is full."""

    def __init__(self, every: int) -> None:
        self.every = every
        self.calls = 0
        self.polls = 0
        self.queued: list[tuple] = []

    def produce(self, topic, value, key, partition=-1, headers=None):
        self.calls += 1
        if self.calls % self.every == 0:
            raise BufferError("Local: Queue full")
        self.queued.append((topic, value, key, partition, headers))

    def poll(self, timeout):
        self.polls += 1


@pytest.mark.parametrize("shape", ["plain", "partition column", "headers"])
def test_every_row_is_queued_once_in_order_despite_full_queues(shape):
    n = 1_000
    topics = ["t"] * n
    keys = [None if i % 4 == 0 else str(i).encode() for i in range(n)]
    values = [str(i).encode() for i in range(n)]
    partitions = [None if i % 2 else i % 3 for i in range(n)] if shape == "partition column" else None
    headers = [[("h", b"x")] if i % 5 == 0 else None for i in range(n)] if shape == "headers" else None
    producer = FullQueueProducer(every=7)
    _produce_all(producer, topics, keys, values, partitions, headers)
    assert [q[1] for q in producer.queued] == values
    assert [q[2] for q in producer.queued] == keys
    if partitions is not None:
        assert [q[3] for q in producer.queued] == [-1 if p is None else p for p in partitions]
    if headers is not None:
        assert [q[4] for q in producer.queued] == [h or None for h in headers]
    assert producer.polls > 100  # every BufferError was followed by a drain


def test_member_ids_are_colocated_with_their_group_deterministically():
    from eoslog.protocol.coordinator_partition import partition_for
    from eoslog.spark.task_writer import colocated_transactional_id

    group = "eoslog-sink-s-q"
    for partitions in (1, 4, 50):
        for task in range(20):
            base = f"{group}-7-{task}"
            tid = colocated_transactional_id(base, group, partitions)
            assert partition_for(tid, partitions) == partition_for(group, partitions)
            assert tid == base or tid.startswith(base + "~")
            assert colocated_transactional_id(base, group, partitions) == tid  # a retried task finds it again
            assert tid.startswith(f"{group}-7-")  # still under the batch's abort prefix
    assert colocated_transactional_id("x-1", group, None) == "x-1"  # a broker that did not say
