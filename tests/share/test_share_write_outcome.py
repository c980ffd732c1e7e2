"""A share-state write whose request was cut off, or whose answer was an error, must not leave the leader
with a value older than what the share coordinator applied (issue 37's INVALID queue run on a cluster:
an ACCEPT answered NONE came back Available after the next write, an update against the older value).

Deterministic, with the real share-partition manager and share coordinator of an in-process broker: the
write of an acknowledgement is applied and its answer held at a gate, the request is cancelled (its connection closed) or
answered with an error after the write went through, then the member's records are released, which
writes again. The share coordinator's state must still have the acknowledged record done."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from eoslog.coordinator.share.log_format import SharePartitionKey
from eoslog.coordinator.share.shard import ShareAnswer
from eoslog.protocol.errors import ErrorCode
from eoslog.share.in_flight import AcknowledgementBatch
from eoslog.share.partition_state import AcquireMode
from eoslog.share.record_state import AcknowledgeType, RecordState
from eoslog.testing.embedded import EmbeddedBroker

ACCEPT = AcknowledgeType.ACCEPT.value


@pytest.fixture(scope="module")
def embedded(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("share-write-outcome") / "data") as broker:
        yield broker


def _share_partition(embedded) -> tuple[str, SharePartitionKey]:
    """A topic of 3 records and a group reading it from the earliest offset."""
    topic, group = "wo-" + uuid.uuid4().hex[:8], "sg-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": embedded.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)
    producer = Producer({"bootstrap.servers": embedded.bootstrap, "linger.ms": 0})
    for i in range(3):
        producer.produce(topic, value=b"v%d" % i, partition=0)
        producer.flush(30)  # one batch per record
    topic_id = embedded.call(lambda: embedded.broker.registry.topic_ids()[topic])
    manager = embedded.call(embedded.broker._shares)

    async def initialize():  # as the group coordinator does on the first assignment
        return await manager.persister.initialize_state(group, topic_id, 0, state_epoch=0, start_offset=-1)

    assert embedded.call(initialize).error is ErrorCode.NONE
    return topic, SharePartitionKey(group, topic_id, 0)


def _state_of(embedded, key: SharePartitionKey) -> tuple[int, dict[int, RecordState]]:
    """The share coordinator's state: its start offset and each listed offset's state."""
    manager = embedded.broker.share_partitions

    async def read():
        return await manager.persister.read_state(key.group_id, key.topic_id, key.partition, leader_epoch=-1)

    answer = embedded.call(read)
    assert answer.error is ErrorCode.NONE, answer
    states = {offset: RecordState.from_id(b.delivery_state) for b in answer.state.state_batches
              for offset in range(b.first_offset, b.last_offset + 1)}
    return answer.state.start_offset, states


def _acquire_and_accept_the_middle(embedded, topic: str, key: SharePartitionKey, member: str):
    manager = embedded.broker._shares()

    async def steps():
        got = await manager.acquire(key, topic, member, max_records=10, max_bytes=1 << 20, min_one_batch=True,
                                    mode=AcquireMode.BATCH_OPTIMIZED, batch_size=10)
        assert [(r.first_offset, r.last_offset) for r in got.acquired] == [(0, 2)], got.acquired
        answer = await manager.acknowledge(key, topic, member, [AcknowledgementBatch(1, 1, (ACCEPT,))])
        assert answer[0] is ErrorCode.NONE, answer

    embedded.call(steps)
    return manager


def _accept_the_rest_cut_off(embedded, manager, topic, key, member, *, error: ErrorCode | None) -> None:
    """The member accepts offsets 0 and 2 (the start offset moves to 3); its write is applied by the share
    coordinator and its answer held at a gate; then either its request is cancelled (error None) or the
    answer is ``error``; then the member's records are released (its session closed), which writes if it holds any."""
    original = manager.persister.write_state

    async def steps():
        reached, gate = asyncio.Event(), asyncio.Event()

        async def gated(*args, **kwargs):
            # Applied by the share coordinator, its answer not yet back (as while the high watermark passes it).
            answer = await original(*args, **kwargs)
            assert answer.error is ErrorCode.NONE, answer
            reached.set()
            await gate.wait()
            return answer if error is None else ShareAnswer(error, "the answer the leader was given")

        manager.persister.write_state = gated
        try:
            request = asyncio.get_running_loop().create_task(manager.acknowledge(
                key, topic, member, [AcknowledgementBatch(0, 0, (ACCEPT,)), AcknowledgementBatch(2, 2, (ACCEPT,))]))
            await asyncio.wait_for(reached.wait(), 30)
            if error is None:
                request.cancel()  # the connection closed under it
            gate.set()
            try:
                await asyncio.wait_for(request, 30)
            except asyncio.CancelledError:
                assert error is None
        finally:
            manager.persister.write_state = original
        await manager.release_member(key, member)

    embedded.call(steps)


@pytest.mark.parametrize("error", [None, ErrorCode.REQUEST_TIMED_OUT], ids=["cancelled", "timed-out-answer"])
def test_an_acknowledgement_cut_off_mid_write_is_never_undone_by_the_next_write(embedded, error):
    topic, key = _share_partition(embedded)
    member = "member-" + uuid.uuid4().hex[:6]
    manager = _acquire_and_accept_the_middle(embedded, topic, key, member)
    assert _state_of(embedded, key) == (0, {0: RecordState.AVAILABLE, 1: RecordState.ACKNOWLEDGED,
                                            2: RecordState.AVAILABLE})
    _accept_the_rest_cut_off(embedded, manager, topic, key, member, error=error)
    start, states = _state_of(embedded, key)
    # The write went through (the coordinator applied it: start offset 3). Whatever the leader does next,
    # offset 1, accepted and answered NONE, stays done: below the start offset, or listed ACKNOWLEDGED.
    assert start > 1 or states.get(1) is RecordState.ACKNOWLEDGED, (start, states)
    assert start == 3, (start, states)
    # And the leader's next acquisition hands out nothing of 0-2 again.

    async def acquire():
        return await manager.acquire(key, topic, "other-" + member, max_records=10, max_bytes=1 << 20,
                                     min_one_batch=True, mode=AcquireMode.BATCH_OPTIMIZED, batch_size=10)

    assert embedded.call(acquire).acquired == ()
