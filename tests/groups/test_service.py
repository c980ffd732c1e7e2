"""GroupService (the asyncio shell around GroupCoordinator) against a fake broker whose
``__consumer_offsets`` partitions let the test decide when an append becomes durable."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from eoslog.api._group_common import resolve
from eoslog.cluster.topics import CONSUMER_OFFSETS
from eoslog.coordinator.group import PartitionCommit
from eoslog.coordinator.group.errors import Errors
from eoslog.coordinator.group.results import OffsetCommitResponse
from eoslog.coordinator.group.service import GroupService, read_entries
from eoslog.protocol.errors import KafkaStorageError, NotLeaderOrFollowerError, UnknownTopicOrPartitionError
from eoslog.records.batch import decode_batch
from eoslog.records.header import read_header
from eoslog.server.config import BrokerConfig

NUM_PARTITIONS = 4


class FakePartition:
    def __init__(self) -> None:
        self.batches: list[bytes] = []
        self.high_watermark = 0
        self.waiters: list[tuple[int, asyncio.Future]] = []
        self.fail_append: Exception | None = None

    @property
    def log_end_offset(self) -> int:
        return sum(len(decode_batch(b).records) for b in self.batches)

    def append_internal(self, batch: bytes):
        if self.fail_append is not None:
            raise self.fail_append
        first = self.log_end_offset
        self.batches.append(batch)
        return SimpleNamespace(first_offset=first, last_offset=self.log_end_offset - 1)

    def wait_for_high_watermark(self, offset: int) -> asyncio.Future:
        future = asyncio.get_running_loop().create_future()
        if self.high_watermark >= offset:
            future.set_result(None)
        else:
            self.waiters.append((offset, future))
        return future

    def flush(self, error: Exception | None = None) -> None:
        """The group commit finished: everything appended is durable (or the fsync failed)."""
        if error is None:
            self.high_watermark = self.log_end_offset
        for target, future in self.waiters:
            if error is not None:
                future.set_exception(error)
            elif target <= self.high_watermark:
                future.set_result(None)
        self.waiters = [(t, f) for t, f in self.waiters if not f.done()]


class FakeBroker:
    def __init__(self) -> None:
        self.config = BrokerConfig(offsets_topic_num_partitions=NUM_PARTITIONS,
                                   group_initial_rebalance_delay_ms=0)
        self.partitions: dict = {}
        self.topics = SimpleNamespace(get=lambda name: None)
        self.transaction_coordinator = SimpleNamespace(offsets_marker_listeners=[])
        self.registry = self  # the fake plays the partition registry too

    def ensure_internal_topic(self, name):
        assert name == CONSUMER_OFFSETS
        for index in range(NUM_PARTITIONS):
            self.partitions.setdefault((name, index), FakePartition())

    def partition(self, topic, index):
        return self.partitions[(topic, index)]


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def run(coro):
    return asyncio.run(coro)


def commit(service: GroupService, group: str, offset: int):
    return service.call("commit_offsets", group, [PartitionCommit("t", 0, offset)])


def test_a_commit_is_answered_only_after_its_record_is_durable():
    async def scenario():
        broker = FakeBroker()
        service = GroupService(broker)
        await service.start()
        assert broker.transaction_coordinator.offsets_marker_listeners == [service.on_txn_marker]
        answer = commit(service, "g", 42)
        partition = broker.partition(CONSUMER_OFFSETS, service.coordinator.partition_for("g"))
        assert len(partition.batches) == 1  # appended at once...
        await settle()
        assert not answer.done()  # ...but not acknowledged before the fsync
        assert service.fetch_offsets("g", [("t", 0)]).partitions[0].offset == -1  # nor applied
        partition.flush()
        response = await asyncio.wait_for(answer, 1)
        assert response.partitions[0].error is Errors.NONE
        assert service.fetch_offsets("g", [("t", 0)]).partitions[0].offset == 42
        await service.stop()

    run(scenario())


def test_writes_of_a_partition_complete_in_append_order():
    async def scenario():
        broker = FakeBroker()
        service = GroupService(broker)
        await service.start()
        answers = [commit(service, "g", offset) for offset in (1, 2, 3)]
        partition = broker.partition(CONSUMER_OFFSETS, service.coordinator.partition_for("g"))
        assert len(partition.batches) == 3
        done_order = []
        for i, answer in enumerate(answers):
            answer.add_done_callback(lambda _, i=i: done_order.append(i))
        partition.flush()
        await asyncio.wait_for(asyncio.gather(*answers), 1)
        assert done_order == [0, 1, 2]
        assert service.fetch_offsets("g", [("t", 0)]).partitions[0].offset == 3
        await service.stop()

    run(scenario())


@pytest.mark.parametrize("failure, expected", [
    (UnknownTopicOrPartitionError("gone"), Errors.COORDINATOR_NOT_AVAILABLE),
    (NotLeaderOrFollowerError("moved"), Errors.NOT_COORDINATOR),
    (KafkaStorageError("disk"), Errors.NOT_COORDINATOR),
    (RuntimeError("bug"), Errors.UNKNOWN_SERVER_ERROR),
])
def test_a_failed_append_is_answered_with_a_coordinator_error_and_not_applied(failure, expected):
    async def scenario():
        broker = FakeBroker()
        broker.ensure_internal_topic(CONSUMER_OFFSETS)
        service = GroupService(broker)
        await service.start()
        broker.partition(CONSUMER_OFFSETS, service.coordinator.partition_for("g")).fail_append = failure
        response: OffsetCommitResponse = await asyncio.wait_for(commit(service, "g", 9), 1)
        assert response.partitions[0].error is expected
        assert service.fetch_offsets("g", [("t", 0)]).partitions[0].offset == -1
        await service.stop()

    run(scenario())


def test_a_failed_fsync_fails_the_commit():
    async def scenario():
        broker = FakeBroker()
        service = GroupService(broker)
        await service.start()
        answer = commit(service, "g", 9)
        await settle()  # the write waits for its fsync...
        broker.partition(CONSUMER_OFFSETS, service.coordinator.partition_for("g")).flush(KafkaStorageError("fsync"))
        response = await asyncio.wait_for(answer, 1)
        assert response.partitions[0].error is Errors.NOT_COORDINATOR
        assert service.fetch_offsets("g", [("t", 0)]).partitions[0].offset == -1
        await service.stop()

    run(scenario())


def test_transactional_offsets_go_into_a_transactional_batch_and_wait_for_the_marker():
    async def scenario():
        broker = FakeBroker()
        service = GroupService(broker)
        await service.start()
        answer = service.call("txn_commit_offsets", "g", 7000, 3, [PartitionCommit("t", 0, 55)])
        index = service.coordinator.partition_for("g")
        partition = broker.partition(CONSUMER_OFFSETS, index)
        header = read_header(partition.batches[0])
        assert (header.producer_id, header.producer_epoch, header.is_transactional) == (7000, 3, True)
        partition.flush()
        assert (await asyncio.wait_for(answer, 1)).partitions[0].error is Errors.NONE
        [fetched] = service.fetch_offsets("g", [("t", 0)], require_stable=True).partitions
        assert (fetched.offset, fetched.error) == (-1, Errors.UNSTABLE_OFFSET_COMMIT)
        # The transaction coordinator reports the COMMIT marker through its listener.
        for listener in broker.transaction_coordinator.offsets_marker_listeners:
            listener(index, 7000, True)
        [fetched] = service.fetch_offsets("g", [("t", 0)], require_stable=True).partitions
        assert (fetched.offset, fetched.error) == (55, Errors.NONE)
        await service.stop()

    run(scenario())


def test_the_join_barrier_timer_fires_without_any_request():
    """A member that joins and goes silent is removed by the service's timer (session timeout)."""
    async def scenario():
        broker = FakeBroker()
        broker.config.group_min_session_timeout_ms = 100
        service = GroupService(broker)
        await service.start()
        kwargs = {"protocol_type": "consumer", "protocols": (("range", b""),), "session_timeout_ms": 200,
                  "rebalance_timeout_ms": 200, "require_known_member_id": False}
        joined = await resolve(service.call("join_group", "g", "", **kwargs))
        assert joined.error is Errors.NONE and joined.generation_id == 1
        synced = service.call("sync_group", "g", joined.member_id, 1, {joined.member_id: b"A"})
        partition = broker.partition(CONSUMER_OFFSETS, service.coordinator.partition_for("g"))
        partition.flush()
        assert (await asyncio.wait_for(synced, 1)).assignment == b"A"
        assert service.coordinator.describe("g").state == "Stable"
        # No heartbeat: the session timeout empties the group, and the Empty group's record is written.
        for _ in range(100):
            await asyncio.sleep(0.02)
            partition.flush()
            if service.coordinator.describe("g").state == "Empty":
                break
        assert service.coordinator.describe("g").state == "Empty"
        await service.stop()

    run(scenario())


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
    entries = list(read_entries(SimpleNamespace(log=log)))
    log.close()
    assert [(e.offset, e.key, e.value, e.producer_id, e.is_transactional, e.marker) for e in entries] == [
        (0, b"k1", b"v1", -1, False, None),
        (1, b"k2", None, -1, False, None),
        (2, b"k3", b"v3", 5, True, None),
        (3, None, None, 5, True, Marker.COMMIT),
    ]
