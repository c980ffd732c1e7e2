"""The group coordinator's shard on the coordinator runtime, built from the real pieces of a sole broker
(registry, replica manager, runtime, partitions and logs in a temporary directory). Only the group
commit is held: the test decides when an append becomes durable, as an fsync finishing would."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from eoslog.api._group_common import resolve
from eoslog.cluster.registry import PartitionRegistry
from eoslog.cluster.replica_manager import ReplicaManager, ReplicationConfig
from eoslog.cluster.topics import CONSUMER_OFFSETS, InternalTopic
from eoslog.coordinator.group import PartitionCommit
from eoslog.coordinator.group.config import GroupConfig
from eoslog.coordinator.group.errors import Errors
from eoslog.coordinator.group.results import OffsetCommitResponse
from eoslog.coordinator.group.shard import GroupShard, read_entries
from eoslog.coordinator.runtime import CoordinatorRuntime
from eoslog.log.eager_future import EagerFuture
from eoslog.protocol.errors import KafkaStorageError, NotLeaderOrFollowerError, UnknownTopicOrPartitionError
from eoslog.records.header import read_header
from eoslog.server.config import BrokerConfig

NUM_PARTITIONS = 4


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
    """The coordinator runtime of a broker without ZooKeeper, with the group shard registered."""

    def __init__(self, data_dir: Path, **group_config) -> None:
        config = BrokerConfig(data_dir=str(data_dir), offsets_topic_num_partitions=NUM_PARTITIONS)
        self.registry = PartitionRegistry(config, dict(config.log_defaults))
        replicas = ReplicaManager(ReplicationConfig(broker_id=config.node_id), self.registry, None)
        self.registry.partition_listeners.append(replicas.partition_opened)
        self.runtime = CoordinatorRuntime(self.registry, replicas)
        group_config = GroupConfig(offsets_topic_num_partitions=NUM_PARTITIONS, initial_rebalance_delay_ms=0,
                                   **group_config)
        self.runtime.register(InternalTopic(CONSUMER_OFFSETS, NUM_PARTITIONS),
                              lambda: GroupShard(self.runtime, group_config))
        self.registry.open_single_node(data_dir)
        self.held = self.registry.log_directory.group_commit = HeldGroupCommit()
        self.runtime.start()
        self.shard: GroupShard = self.runtime.shard(CONSUMER_OFFSETS)

    def partition_of(self, group_id: str):
        return self.registry.partition(CONSUMER_OFFSETS, self.shard.core.partition_for(group_id))

    async def close(self) -> None:
        self.held.release()
        await self.runtime.stop()
        await self.registry.close()


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def commit(shard: GroupShard, group: str, offset: int):
    return shard.call("commit_offsets", group, [PartitionCommit("t", 0, offset)])


def test_a_commit_is_answered_only_after_its_record_is_durable(tmp_path):
    async def scenario():
        broker = SoleBroker(tmp_path)
        shard = broker.shard
        answer = commit(shard, "g", 42)
        partition = broker.partition_of("g")
        assert partition.log_end_offset == 1  # appended at once...
        await settle()
        assert not answer.done()  # ...but not acknowledged before the fsync
        assert shard.fetch_offsets("g", [("t", 0)]).partitions[0].offset == -1  # nor applied
        broker.held.release()
        response = await asyncio.wait_for(answer, 1)
        assert response.partitions[0].error is Errors.NONE
        assert shard.fetch_offsets("g", [("t", 0)]).partitions[0].offset == 42
        await broker.close()

    asyncio.run(scenario())


def test_writes_of_a_partition_complete_in_append_order(tmp_path):
    async def scenario():
        broker = SoleBroker(tmp_path)
        shard = broker.shard
        answers = [commit(shard, "g", offset) for offset in (1, 2, 3)]
        assert broker.partition_of("g").log_end_offset == 3
        done_order = []
        for i, answer in enumerate(answers):
            answer.add_done_callback(lambda _, i=i: done_order.append(i))
        broker.held.release()
        await asyncio.wait_for(asyncio.gather(*answers), 1)
        assert done_order == [0, 1, 2]
        assert shard.fetch_offsets("g", [("t", 0)]).partitions[0].offset == 3
        await broker.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("failure, expected", [
    (UnknownTopicOrPartitionError("gone"), Errors.COORDINATOR_NOT_AVAILABLE),
    (NotLeaderOrFollowerError("moved"), Errors.NOT_COORDINATOR),
    (KafkaStorageError("disk"), Errors.NOT_COORDINATOR),
    (RuntimeError("bug"), Errors.UNKNOWN_SERVER_ERROR),
])
def test_a_failed_append_is_answered_with_a_coordinator_error_and_not_applied(tmp_path, failure, expected):
    async def scenario():
        broker = SoleBroker(tmp_path)
        shard = broker.shard
        broker.runtime.ensure_topic(CONSUMER_OFFSETS)
        partition = broker.partition_of("g")

        def refuse(batch):
            raise failure

        partition.append_internal = refuse
        response: OffsetCommitResponse = await asyncio.wait_for(commit(shard, "g", 9), 1)
        assert response.partitions[0].error is expected
        assert shard.fetch_offsets("g", [("t", 0)]).partitions[0].offset == -1
        await broker.close()

    asyncio.run(scenario())


def test_a_failed_fsync_fails_the_commit(tmp_path):
    async def scenario():
        broker = SoleBroker(tmp_path)
        shard = broker.shard
        answer = commit(shard, "g", 9)
        await settle()  # the write waits for its fsync...
        broker.held.release(KafkaStorageError("fsync"))
        response = await asyncio.wait_for(answer, 1)
        assert response.partitions[0].error is Errors.NOT_COORDINATOR
        assert shard.fetch_offsets("g", [("t", 0)]).partitions[0].offset == -1
        await broker.close()

    asyncio.run(scenario())


def test_transactional_offsets_go_into_a_transactional_batch_and_wait_for_the_marker(tmp_path):
    async def scenario():
        broker = SoleBroker(tmp_path)
        shard = broker.shard
        answer = shard.call("txn_commit_offsets", "g", 7000, 3, [PartitionCommit("t", 0, 55)])
        partition = broker.partition_of("g")
        header = read_header(partition.log.read(0, 1 << 20).to_bytes())
        assert (header.producer_id, header.producer_epoch, header.is_transactional) == (7000, 3, True)
        broker.held.release()
        assert (await asyncio.wait_for(answer, 1)).partitions[0].error is Errors.NONE
        [fetched] = shard.fetch_offsets("g", [("t", 0)], require_stable=True).partitions
        assert (fetched.offset, fetched.error) == (-1, Errors.UNSTABLE_OFFSET_COMMIT)
        # The transaction coordinator reports the COMMIT marker once it is durable.
        shard.on_txn_marker(partition.index, 7000, True)
        [fetched] = shard.fetch_offsets("g", [("t", 0)], require_stable=True).partitions
        assert (fetched.offset, fetched.error) == (55, Errors.NONE)
        await broker.close()

    asyncio.run(scenario())


def test_the_join_barrier_timer_fires_without_any_request(tmp_path):
    """A member that joins and goes silent is removed by the runtime's timer (session timeout)."""
    async def scenario():
        broker = SoleBroker(tmp_path, min_session_timeout_ms=100)
        shard = broker.shard
        kwargs = {"protocol_type": "consumer", "protocols": (("range", b""),), "session_timeout_ms": 200,
                  "rebalance_timeout_ms": 200, "require_known_member_id": False}
        joined = await resolve(shard.call("join_group", "g", "", **kwargs))
        assert joined.error is Errors.NONE and joined.generation_id == 1
        synced = shard.call("sync_group", "g", joined.member_id, 1, {joined.member_id: b"A"})
        broker.held.release()
        assert (await asyncio.wait_for(synced, 1)).assignment == b"A"
        assert shard.core.describe("g").state == "Stable"
        # No heartbeat: the session timeout empties the group, and the Empty group's record is written.
        for _ in range(100):
            await asyncio.sleep(0.02)
            broker.held.release()
            if shard.core.describe("g").state == "Empty":
                break
        assert shard.core.describe("g").state == "Empty"
        await broker.close()

    asyncio.run(scenario())


def test_read_entries_gives_records_and_markers_in_log_order(tmp_path):
    """read_entries over a real log: plain, transactional and control batches."""
    from eoslog.coordinator.group.log_format import Marker
    from eoslog.log.config import LogConfig
    from eoslog.log.log import Log
    from eoslog.records.builder import SimpleRecord, build_batch
    from eoslog.records.control import ControlType, build_control_batch

    log = Log.open(str(tmp_path / f"{CONSUMER_OFFSETS}-0"), LogConfig.from_properties({}))
    log.append(build_batch([SimpleRecord(b"k1", b"v1"), SimpleRecord(b"k2", None)]))
    log.append(build_batch([SimpleRecord(b"k3", b"v3")], producer_id=5, producer_epoch=0, base_sequence=0,
                           is_transactional=True))
    log.append(build_control_batch(ControlType.COMMIT, 5, 0, 0))
    entries = list(read_entries(log))
    log.close()
    assert [(e.offset, e.key, e.value, e.producer_id, e.is_transactional, e.marker) for e in entries] == [
        (0, b"k1", b"v1", -1, False, None),
        (1, b"k2", None, -1, False, None),
        (2, b"k3", b"v3", 5, True, None),
        (3, None, None, 5, True, Marker.COMMIT),
    ]
