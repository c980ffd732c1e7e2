"""The share coordinator's shard on the coordinator runtime, over the real pieces of a sole broker (partition
registry, replica manager, runtime, partitions and logs in a temporary directory). Only the group commit is
held: the test decides when an append becomes durable, as an fsync finishing would."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from eoslog.cluster.registry import PartitionRegistry
from eoslog.cluster.replica_manager import ReplicaManager, ReplicationConfig
from eoslog.cluster.topics import SHARE_GROUP_STATE, InternalTopic
from eoslog.coordinator.runtime import CoordinatorRuntime, Ownership
from eoslog.coordinator.share.config import ShareCoordinatorConfig
from eoslog.coordinator.share.log_format import (
    SHARE_SNAPSHOT,
    SHARE_UPDATE,
    SharePartitionKey,
    StateBatch,
    decode_key,
)
from eoslog.coordinator.share.shard import ShareShard, read_records
from eoslog.coordinator.share.state import UNINITIALIZED
from eoslog.log.eager_future import EagerFuture
from eoslog.protocol.errors import (
    ErrorCode,
    KafkaStorageError,
    NotLeaderOrFollowerError,
    UnknownTopicOrPartitionError,
)
from eoslog.server.config import BrokerConfig

NUM_PARTITIONS = 4
TOPIC = uuid.UUID(int=7)
KEY = SharePartitionKey("g", TOPIC, 0)


class HeldGroupCommit:
    """The log directory's group commit, holding every fsync until :meth:`release`."""

    def __init__(self) -> None:
        self.waiting: list[tuple[object, EagerFuture]] = []

    def request(self, log) -> EagerFuture | None:
        if log.recovery_point >= log.log_end_offset:
            return None
        future = EagerFuture()
        self.waiting.append((log, future))
        return future

    def release(self, error: Exception | None = None) -> None:
        waiting, self.waiting = self.waiting, []
        for log, future in waiting:
            if error is None:
                log.flush()
                future.set_result(None)
            else:
                future.set_exception(error)

    def forget(self, log) -> None:
        pass

    def close(self) -> None:
        pass


class SoleBroker:
    """The coordinator runtime of a broker without ZooKeeper, with the share coordinator registered as
    server/broker.py registers it."""

    def __init__(self, data_dir: Path, **config) -> None:
        broker_config = BrokerConfig(data_dir=str(data_dir))
        self.registry = PartitionRegistry(broker_config, dict(broker_config.log_defaults))
        replicas = ReplicaManager(ReplicationConfig(broker_id=broker_config.node_id), self.registry, None)
        self.registry.partition_listeners.append(replicas.partition_opened)
        self.runtime = CoordinatorRuntime(self.registry, replicas)
        self.config = ShareCoordinatorConfig(**config)
        self.runtime.register(InternalTopic(SHARE_GROUP_STATE, NUM_PARTITIONS, 1,
                                            {"cleanup.policy": "delete", "retention.ms": "-1"}),
                              lambda: ShareShard(self.runtime, self.config))
        self.registry.open_single_node(data_dir)
        self.held = self.registry.log_directory.group_commit = HeldGroupCommit()
        self.runtime.start()
        self.shard: ShareShard = self.runtime.shard(SHARE_GROUP_STATE)
        self.index = self.shard.partition_for(KEY)

    def partition(self):
        return self.registry.partition(SHARE_GROUP_STATE, self.index)

    def record_types(self) -> list[int]:
        return [decode_key(key)[0] for _, key, _ in read_records(self.partition().log)]

    async def close(self) -> None:
        self.held.release()
        await self.runtime.stop()
        await self.registry.close()


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def answered(call):
    """The answer of a call that writes nothing (a refusal, a read): at once, never waiting for an fsync."""
    return await asyncio.wait_for(call, 1)


async def durable(broker: SoleBroker, call):
    """Starts ``call``, lets its record reach the log, releases the fsync, and answers."""
    task = asyncio.ensure_future(call)
    await settle()
    broker.held.release()
    return await asyncio.wait_for(task, 1)


def initialize(shard: ShareShard, key=KEY, state_epoch=0, start_offset=0):
    return shard.initialize_state(key.group_id, key.topic_id, key.partition, state_epoch=state_epoch,
                                  start_offset=start_offset)


def write(shard: ShareShard, batches, key=KEY, leader_epoch=0, state_epoch=0, start_offset=-1):
    return shard.write_state(key.group_id, key.topic_id, key.partition, state_epoch=state_epoch,
                             leader_epoch=leader_epoch, start_offset=start_offset, state_batches=batches)


def read(shard: ShareShard, key=KEY, leader_epoch=0):
    return shard.read_state(key.group_id, key.topic_id, key.partition, leader_epoch=leader_epoch)


def test_initialize_is_answered_and_applied_only_once_its_snapshot_is_durable(tmp_path):
    async def scenario():
        broker = SoleBroker(tmp_path)
        shard = broker.shard
        answer = asyncio.ensure_future(initialize(shard, state_epoch=1, start_offset=5))
        await settle()
        assert broker.partition().log_end_offset == 1  # appended at once...
        assert not answer.done()  # ...not answered before the fsync
        assert (await shard.read_state_summary("g", TOPIC, 0)).state == UNINITIALIZED  # nor applied
        broker.held.release()
        assert (await asyncio.wait_for(answer, 1)).error is ErrorCode.NONE
        summary = await shard.read_state_summary("g", TOPIC, 0)
        assert (summary.state.state_epoch, summary.state.start_offset) == (1, 5)
        assert broker.record_types() == [SHARE_SNAPSHOT]
        # the topic was created for the share coordinator as registered: deleted by pruning, never compacted
        info = broker.registry.topics.get(SHARE_GROUP_STATE)
        assert info.configs["cleanup.policy"] == "delete" and not broker.registry.log_config_for(info).compacts
        await broker.close()

    asyncio.run(scenario())


def test_write_then_read_and_writes_of_one_share_partition_wait_for_each_other(tmp_path):
    async def scenario():
        broker = SoleBroker(tmp_path)
        shard = broker.shard
        await durable(broker, initialize(shard))
        first = asyncio.ensure_future(write(shard, [StateBatch(0, 9, 2, 1)]))
        second = asyncio.ensure_future(write(shard, [StateBatch(10, 19, 2, 1)]))
        await settle()
        # the second decides only once the first is applied: one record in the log meanwhile
        assert broker.partition().log_end_offset == 2
        broker.held.release()
        assert (await asyncio.wait_for(first, 1)).error is ErrorCode.NONE
        await settle()
        assert broker.partition().log_end_offset == 3
        broker.held.release()
        assert (await asyncio.wait_for(second, 1)).error is ErrorCode.NONE
        answer = await answered(read(shard))
        assert answer.error is ErrorCode.NONE
        assert answer.state.state_batches == (StateBatch(0, 19, 2, 1),) and answer.state.start_offset == 0
        assert broker.record_types() == [SHARE_SNAPSHOT, SHARE_UPDATE, SHARE_UPDATE]
        await broker.close()

    asyncio.run(scenario())


def test_writes_of_different_share_partitions_do_not_wait_for_each_other(tmp_path):
    async def scenario():
        broker = SoleBroker(tmp_path)
        shard = broker.shard
        keys = [SharePartitionKey("g", TOPIC, p) for p in range(8)]
        answers = [asyncio.ensure_future(initialize(shard, key)) for key in keys]
        await settle()
        appended = sum(broker.registry.partition(SHARE_GROUP_STATE, i).log_end_offset for i in range(NUM_PARTITIONS))
        assert appended == len(keys)
        broker.held.release()
        assert all(a.error is ErrorCode.NONE for a in await asyncio.wait_for(asyncio.gather(*answers), 1))
        await broker.close()

    asyncio.run(scenario())


def test_fenced_writes(tmp_path):
    async def scenario():
        broker = SoleBroker(tmp_path)
        shard = broker.shard
        await durable(broker, initialize(shard, state_epoch=2))
        assert (await durable(broker, read(shard, leader_epoch=3))).error is ErrorCode.NONE
        log_end = broker.partition().log_end_offset
        assert (await answered(write(shard, [StateBatch(0, 0, 2, 1)], leader_epoch=2, state_epoch=2))).error \
            is ErrorCode.FENCED_LEADER_EPOCH
        assert (await answered(write(shard, [StateBatch(0, 0, 2, 1)], leader_epoch=3, state_epoch=1))).error \
            is ErrorCode.FENCED_STATE_EPOCH
        assert (await answered(write(shard, [StateBatch(0, 0, 2, 1)], key=SharePartitionKey("h", TOPIC, 0)))).error \
            is ErrorCode.INVALID_REQUEST  # never initialized
        assert broker.partition().log_end_offset == log_end  # nothing written for a refusal
        await broker.close()

    asyncio.run(scenario())


def test_a_snapshot_after_the_configured_number_of_updates(tmp_path):
    async def scenario():
        broker = SoleBroker(tmp_path, snapshot_update_records_per_snapshot=2)
        shard = broker.shard
        await durable(broker, initialize(shard))
        for i in range(6):
            assert (await durable(broker, write(shard, [StateBatch(i, i, 2, 1)]))).error is ErrorCode.NONE
        assert broker.record_types() == [0, 1, 1, 0, 1, 1, 0]
        state = (await answered(read(shard))).state
        assert state.snapshot_epoch == 2 and state.state_batches == (StateBatch(0, 5, 2, 1),)
        await broker.close()

    asyncio.run(scenario())


def test_a_reload_over_the_same_data_directory_gives_the_same_state(tmp_path):
    async def scenario():
        broker = SoleBroker(tmp_path, snapshot_update_records_per_snapshot=3)
        shard = broker.shard
        other = SharePartitionKey("g2", TOPIC, 1)
        for key in (KEY, other):
            await durable(broker, initialize(shard, key, state_epoch=1))
            await durable(broker, read(shard, key, leader_epoch=4))
        for i in range(5):
            await durable(broker, write(shard, [StateBatch(10 * i, 10 * i + 4, 2 if i % 2 else 0, i % 3)],
                                        leader_epoch=4, state_epoch=1, start_offset=i))
        await durable(broker, write(shard, [StateBatch(0, 3, 4, 1)], key=other, leader_epoch=4, state_epoch=1))
        before = {index: shard.states(index) for index in range(NUM_PARTITIONS) if shard.states(index) is not None}
        answer_before = await answered(read(shard, leader_epoch=4))
        await broker.close()

        again = SoleBroker(tmp_path, snapshot_update_records_per_snapshot=3)
        # The runtime loads the partitions in the background: until then the keys are loading here.
        assert (await read(again.shard)).error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS  # before the loop turns
        await settle()
        assert again.runtime.ownership(SHARE_GROUP_STATE, again.index) is Ownership.OWNED
        for index, states in before.items():
            assert again.shard.states(index) == states
        assert await answered(read(again.shard, leader_epoch=4)) == answer_before
        # the loaded fences hold: the old leader epoch is still refused
        fenced = await answered(write(again.shard, [], leader_epoch=3, state_epoch=1))
        assert fenced.error is ErrorCode.FENCED_LEADER_EPOCH
        await again.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("failure, expected", [
    (UnknownTopicOrPartitionError("gone"), ErrorCode.COORDINATOR_NOT_AVAILABLE),
    (NotLeaderOrFollowerError("moved"), ErrorCode.NOT_COORDINATOR),
    (KafkaStorageError("disk"), ErrorCode.NOT_COORDINATOR),
    (RuntimeError("bug"), ErrorCode.UNKNOWN_SERVER_ERROR),
])
def test_a_failed_append_is_answered_with_a_coordinator_error_and_not_applied(tmp_path, failure, expected):
    async def scenario():
        broker = SoleBroker(tmp_path)
        broker.runtime.ensure_topic(SHARE_GROUP_STATE)

        def refuse(batch):
            raise failure

        broker.partition().append_internal = refuse
        assert (await answered(initialize(broker.shard))).error is expected
        assert (await broker.shard.read_state_summary("g", TOPIC, 0)).state == UNINITIALIZED
        await broker.close()

    asyncio.run(scenario())


def test_a_failed_fsync_fails_the_write_and_changes_nothing(tmp_path):
    async def scenario():
        broker = SoleBroker(tmp_path)
        answer = asyncio.ensure_future(initialize(broker.shard))
        await settle()
        broker.held.release(KafkaStorageError("fsync"))
        assert (await asyncio.wait_for(answer, 1)).error is ErrorCode.NOT_COORDINATOR
        assert (await answered(read(broker.shard))).error is ErrorCode.INVALID_REQUEST  # still never initialized
        await broker.close()

    asyncio.run(scenario())


def test_a_caller_that_stops_waiting_does_not_leave_memory_behind_the_log(tmp_path):
    async def scenario():
        broker = SoleBroker(tmp_path)
        caller = asyncio.ensure_future(initialize(broker.shard, state_epoch=3))
        await settle()
        caller.cancel()  # the client went away; its record is in the log all the same
        broker.held.release()
        await settle()
        assert (await broker.shard.read_state_summary("g", TOPIC, 0)).state.state_epoch == 3
        await broker.close()

    asyncio.run(scenario())


def test_ownership_refusals(tmp_path, monkeypatch):
    async def scenario():
        broker = SoleBroker(tmp_path)
        monkeypatch.setattr(broker.runtime, "ownership", lambda topic, index: Ownership.NOT_COORDINATOR)
        for answer in (await answered(initialize(broker.shard)), await answered(read(broker.shard)),
                       await broker.shard.read_state_summary("g", TOPIC, 0),
                       await broker.shard.delete_state("g", TOPIC, 0)):
            assert answer.error is ErrorCode.NOT_COORDINATOR
        assert broker.registry.topics.get(SHARE_GROUP_STATE) is None  # nothing was written anywhere
        await broker.close()

    asyncio.run(scenario())


def test_delete_writes_a_tombstone(tmp_path):
    async def scenario():
        broker = SoleBroker(tmp_path)
        shard = broker.shard
        await durable(broker, initialize(shard))
        assert (await durable(broker, shard.delete_state("g", TOPIC, 0))).error is ErrorCode.NONE
        assert (await answered(read(shard))).error is ErrorCode.INVALID_REQUEST
        [*_, (_, _, value)] = read_records(broker.partition().log)
        assert value is None
        await broker.close()

    asyncio.run(scenario())


def test_cold_snapshots_and_pruning_delete_only_what_newer_snapshots_replace(tmp_path):
    async def scenario():
        broker = SoleBroker(tmp_path, cold_partition_snapshot_interval_ms=60_000,
                            state_topic_prune_interval_ms=60_000)
        shard = broker.shard
        keys = [KEY, SharePartitionKey("g", TOPIC, 4)]  # two share partitions on one state partition
        assert shard.partition_for(keys[1]) == broker.index
        for key in keys:
            await durable(broker, initialize(shard, key))
        await durable(broker, write(shard, [StateBatch(0, 0, 2, 1)]))
        assert shard.prune() == {}  # the first snapshot is the oldest newest-snapshot: nothing below 0
        # The timer's work a minute later, as the runtime runs it: a new snapshot of each quiet share
        # partition, then pruning.
        task = asyncio.ensure_future(shard.on_deadline(shard.next_deadline_ms() + 1_000))
        await settle()
        broker.held.release()
        await asyncio.wait_for(task, 1)
        partition = broker.partition()
        assert broker.record_types() == [SHARE_SNAPSHOT, SHARE_SNAPSHOT]  # the two cold snapshots are left
        assert partition.log_start_offset == 3 and partition.log_end_offset == 5
        memory = shard.states(broker.index)
        await broker.close()

        again = SoleBroker(tmp_path)
        await settle()
        assert again.shard.states(again.index) == memory  # the pruned log still holds everything
        await again.close()

    asyncio.run(scenario())


def test_the_timer_asks_for_work_only_when_an_interval_passed(tmp_path):
    async def scenario():
        broker = SoleBroker(tmp_path, cold_partition_snapshot_interval_ms=60_000,
                            state_topic_prune_interval_ms=30_000)
        shard = broker.shard
        deadline = shard.next_deadline_ms()
        assert shard.on_deadline(deadline - 1) is None
        work = shard.on_deadline(deadline)  # pruning is due, cold snapshots not yet
        assert work is not None
        await work
        assert shard.next_deadline_ms() == deadline + 30_000
        await broker.close()

    asyncio.run(scenario())
