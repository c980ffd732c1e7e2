"""Transaction groups end to end (docs/spark.md, "Broker extension: transaction groups"): real
confluent-kafka transactional producers write and leave their transactions open; eoslog's private
CommitTransactionGroup / DescribeTransactionGroups / AbortTransactionsByPrefix, sent with our own
spec-generated codec, decide them; read_committed consumers check what became visible. Also: pinning,
and the broker SIGKILLed right after a group's commit point, rolled forward at the next start."""

from __future__ import annotations

import asyncio
import itertools
import socket
import struct
import threading
import time

import confluent_kafka
import pytest
from txn_clients import READERS, create_topics

from eoslog.coordinator.transaction.state import TransactionState
from eoslog.protocol import codec, messages
from eoslog.protocol.codec import RequestHeader
from eoslog.protocol.errors import ErrorCode
from eoslog.testing.embedded import EmbeddedBroker
from eoslog.testing.process import BrokerProcess

COMMIT, DESCRIBE, ABORT_BY_PREFIX, LIST, DESCRIBE_TRANSACTIONS = 0x7E00, 0x7E01, 0x7E02, 0x7E03, 65
Member = messages.CommitTransactionGroupRequest.GroupMember


class Wire:
    """A blocking Kafka-protocol connection speaking through eoslog.protocol.codec."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=60)
        self.ids = itertools.count(1)

    def call(self, api_key: int, request, version: int = 0):
        correlation_id = next(self.ids)
        self.sock.sendall(codec.encode_request(RequestHeader(api_key, version, correlation_id, "groups-test"),
                                               request))
        size = struct.unpack(">i", self._read(4))[0]
        return codec.decode_response(api_key, version, self._read(size))

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            data += chunk
        return data

    def close(self) -> None:
        self.sock.close()

    def commit(self, group: str, sequence: int, members, abort_prefix: str | None = None):
        return self.call(COMMIT, messages.CommitTransactionGroupRequest(
            group_name=group, sequence=sequence, abort_prefix=abort_prefix,
            transactions=[Member(transactional_id=t, producer_id=p, producer_epoch=e) for t, p, e in members]))

    def describe_groups(self, *names: str):
        return self.call(DESCRIBE, messages.DescribeTransactionGroupsRequest(group_names=list(names))).groups

    def abort_by_prefix(self, prefix: str):
        return self.call(ABORT_BY_PREFIX, messages.AbortTransactionsByPrefixRequest(prefix=prefix))

    def list_groups(self, *states: str):
        return self.call(LIST, messages.ListTransactionGroupsRequest(states_filter=list(states)))

    def transaction(self, transactional_id: str):
        """(state name, producer id, producer epoch) from DescribeTransactions."""
        [state] = self.call(DESCRIBE_TRANSACTIONS, messages.DescribeTransactionsRequest(
            transactional_ids=[transactional_id])).transaction_states
        assert state.error_code == 0, ErrorCode(state.error_code).name
        return state.transaction_state, state.producer_id, state.producer_epoch


def wait_for(condition, timeout: float = 30.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise TimeoutError(f"{what} not reached within {timeout} s")


def open_transaction(bootstrap: str, transactional_id: str, writes: dict[tuple[str, int], list[bytes]],
                     **extra) -> confluent_kafka.Producer:
    """A producer whose transaction is written, flushed and left open (never committed)."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                                         "linger.ms": 5, **extra})
    producer.init_transactions(30)
    producer.begin_transaction()
    errors = []
    for (topic, partition), values in writes.items():
        for value in values:
            producer.produce(topic, value=value, partition=partition,
                             on_delivery=lambda err, msg: err and errors.append(err))
    assert producer.flush(30) == 0 and not errors, errors
    return producer


def identity(wire: Wire, transactional_id: str) -> tuple[str, int, int]:
    state, producer_id, producer_epoch = wire.transaction(transactional_id)
    assert state == "Ongoing"
    return transactional_id, producer_id, producer_epoch


def read_committed(bootstrap: str, tps) -> dict:
    # kafka-python's reader, because it also stops at an empty partition (confluent's needs a record).
    return READERS["kafka-python"](bootstrap, tps, "read_committed")


@pytest.fixture
def wire(txn_broker):
    connection = Wire(txn_broker.bootstrap)
    yield connection
    connection.close()


def test_group_commit_replay_and_abort_prefix(txn_broker, wire):
    bootstrap = txn_broker.bootstrap
    create_topics(bootstrap, {"gc-out": 3})
    tps = [("gc-out", p) for p in range(3)]
    group, prefix = "eoslog-sink-s1-q1", "eoslog-sink-s1-q1-"
    writes = {f"{prefix}0-{p}": {("gc-out", p): [f"b0-p{p}-{i}".encode() for i in range(3)]} for p in range(3)}
    writes[f"{prefix}0-1"][("gc-out", 2)] = [b"b0-p1-to-2"]  # one member spans two partitions
    producers = [open_transaction(bootstrap, tid, w) for tid, w in writes.items()]
    members = [identity(wire, tid) for tid in writes]
    assert read_committed(bootstrap, tps) == {tp: [] for tp in tps}  # nothing visible while open

    response = wire.commit(group, 0, members, abort_prefix=prefix)
    assert (response.error_code, response.already_committed, response.last_committed_sequence,
            response.aborted_by_prefix) == (0, False, 0, 0)
    assert [(t.transactional_id, t.error_code) for t in response.transactions] == [(m[0], 0) for m in members]
    # Answered after every marker: all of it is visible at once, on every partition.
    batch0 = {("gc-out", 0): [b"b0-p0-0", b"b0-p0-1", b"b0-p0-2"],
              ("gc-out", 1): [b"b0-p1-0", b"b0-p1-1", b"b0-p1-2"],
              ("gc-out", 2): [b"b0-p2-0", b"b0-p2-1", b"b0-p2-2", b"b0-p1-to-2"]}
    for reader in READERS.values():
        got = reader(bootstrap, tps, "read_committed")
        assert {tp: sorted(v) for tp, v in got.items()} == {tp: sorted(v) for tp, v in batch0.items()}
    assert all(wire.transaction(tid)[0] == "CompleteCommit" for tid in writes)
    [described, unknown] = wire.describe_groups(group, "no-such-group")
    assert (described.error_code, described.last_committed_sequence) == (0, 0)
    assert abs(described.last_commit_timestamp_ms - time.time() * 1000) < 60_000
    assert (unknown.error_code, unknown.last_committed_sequence, unknown.last_commit_timestamp_ms) == (0, -1, -1)

    # A retry whose answer was lost: already committed, nothing aborted.
    retry = wire.commit(group, 0, members, abort_prefix=prefix)
    assert (retry.error_code, retry.already_committed, retry.last_committed_sequence) == (0, True, 0)

    # A replay of batch 0 (same transactional ids, new producers, as Spark re-runs tasks): its members
    # are aborted and "already committed" is the answer; nothing of it ever becomes visible.
    for producer in producers:
        producer.flush(1)
    replays = [open_transaction(bootstrap, tid, {("gc-out", 0): [b"replayed-" + tid.encode()]}) for tid in writes]
    replay_members = [identity(wire, tid) for tid in writes]
    assert all(r[2] > m[2] for r, m in zip(replay_members, members))  # the new producers bumped the epoch
    replayed = wire.commit(group, 0, replay_members, abort_prefix=prefix)
    assert (replayed.error_code, replayed.already_committed, replayed.last_committed_sequence) == (0, True, 0)
    assert all(wire.transaction(tid)[0] == "CompleteAbort" for tid in writes)

    # Batch 1 commits; a straggler under the query's prefix (not a member) is aborted by the prefix,
    # a transaction outside the prefix is left alone.
    member1 = open_transaction(bootstrap, f"{prefix}1-0", {("gc-out", 1): [b"b1"]})
    straggler = open_transaction(bootstrap, f"{prefix}0-7", {("gc-out", 0): [b"straggler"]})
    outsider = open_transaction(bootstrap, "unrelated-writer", {("gc-out", 0): [b"outsider"]})
    response = wire.commit(group, 1, [identity(wire, f"{prefix}1-0")], abort_prefix=prefix)
    assert (response.error_code, response.already_committed, response.last_committed_sequence,
            response.aborted_by_prefix) == (0, False, 1, 1)
    assert wire.transaction(f"{prefix}0-7")[0] == "CompleteAbort"
    assert wire.transaction("unrelated-writer")[0] == "Ongoing"
    outsider.commit_transaction(30)
    got = read_committed(bootstrap, tps)
    assert got[("gc-out", 1)][-1] == b"b1" and got[("gc-out", 0)][-1] == b"outsider"
    assert not any(v.startswith((b"replayed-", b"straggler")) for values in got.values() for v in values)
    assert wire.describe_groups(group)[0].last_committed_sequence == 1
    for producer in [*replays, member1, straggler]:
        producer.flush(1)


def test_validation_failure_commits_nothing(txn_broker, wire):
    bootstrap = txn_broker.bootstrap
    create_topics(bootstrap, {"gv-out": 2})
    tps = [("gv-out", 0), ("gv-out", 1)]
    producers = [open_transaction(bootstrap, f"gv-q-0-{p}", {("gv-out", p): [b"never-%d" % p]}) for p in range(2)]
    good, other = identity(wire, "gv-q-0-0"), identity(wire, "gv-q-0-1")
    fenced = (other[0], other[1], other[2] + 1)
    response = wire.commit("gv-q", 0, [good, fenced, ("gv-never-opened", 5, 0)])
    assert response.error_code == ErrorCode.PRODUCER_FENCED and not response.already_committed
    assert [t.error_code for t in response.transactions] == [
        0, ErrorCode.PRODUCER_FENCED, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND]
    assert response.last_committed_sequence == -1
    assert wire.describe_groups("gv-q")[0].last_committed_sequence == -1  # the sequence was not recorded
    assert wire.transaction("gv-q-0-0")[0] == "CompleteAbort"  # the valid member is aborted...
    assert wire.transaction("gv-q-0-1")[0] == "Ongoing"  # ...one listed under another identity is not
    assert read_committed(bootstrap, tps) == {tps[0]: [], tps[1]: []}
    producers[1].abort_transaction(30)
    assert read_committed(bootstrap, tps) == {tps[0]: [], tps[1]: []}
    # Malformed: nothing changes.
    assert wire.commit("gv-q", -1, [other]).error_code == ErrorCode.INVALID_REQUEST
    assert wire.commit("", 0, []).error_code == ErrorCode.INVALID_REQUEST
    assert wire.commit("gv-q", 0, [good, good]).error_code == ErrorCode.INVALID_REQUEST
    producers[0].flush(1)


def test_abort_transactions_by_prefix(txn_broker, wire):
    bootstrap = txn_broker.bootstrap
    create_topics(bootstrap, {"ga-out": 1})
    tps = [("ga-out", 0)]
    assert wire.abort_by_prefix("ga-q-1").error_code == ErrorCode.INVALID_REQUEST  # shorter than 8
    doomed = [open_transaction(bootstrap, f"ga-query-5-{i}", {("ga-out", 0): [b"doomed-%d" % i]}) for i in range(2)]
    kept = open_transaction(bootstrap, "ga-query-6-0", {("ga-out", 0): [b"kept"]})
    response = wire.abort_by_prefix("ga-query-5-")
    assert response.error_code == 0 and sorted(response.aborted) == ["ga-query-5-0", "ga-query-5-1"]
    assert [wire.transaction(f"ga-query-5-{i}")[0] for i in range(2)] == ["CompleteAbort"] * 2
    # Aborted under epoch + 1: the old producer can no longer commit what it wrote.
    with pytest.raises(confluent_kafka.KafkaException):
        doomed[0].commit_transaction(30)
    assert wire.abort_by_prefix("ga-query-5-").aborted == []  # nothing Ongoing left under it
    kept.commit_transaction(30)
    assert read_committed(bootstrap, tps) == {tps[0]: [b"kept"]}


def test_members_are_pinned_until_their_commit_completes(txn_broker, wire):
    """The roll-forward is held right after the commit point: the members are still Ongoing there, yet
    nothing may move them (InitProducerId, the transaction timeout, an abort by prefix)."""
    bootstrap = txn_broker.bootstrap
    create_topics(bootstrap, {"gp-out": 1})
    groups = txn_broker.broker.coordinators.transaction_groups
    original = groups._commit_member
    loop = txn_broker._loop
    gate = txn_broker.call(lambda: asyncio.get_running_loop().create_future())

    async def held(member):
        await gate
        await original(member)

    # The same short timeout for both: the unpinned one shows the timer has run; the pinned one must not move.
    timeout = {"transaction.timeout.ms": 3000}
    pinned_producer = open_transaction(bootstrap, "gp-query-0-0", {("gp-out", 0): [b"pinned"]}, **timeout)
    loose = open_transaction(bootstrap, "gp-loose-0-0", {("gp-out", 0): [b"loose"]}, **timeout)
    member = identity(wire, "gp-query-0-0")
    groups._commit_member = held
    answers = []
    committer = threading.Thread(target=lambda: answers.append(Wire(bootstrap).commit("gp-query", 3, [member])))
    try:
        committer.start()
        wait_for(lambda: txn_broker.call(lambda: groups.is_pinned("gp-query-0-0")), what="the pin")
        coordinator = txn_broker.broker.coordinators.transactions
        code, _, _ = txn_broker.call(lambda: coordinator.init_producer_id("gp-query-0-0", 60_000, -1, -1, 4))
        assert code == ErrorCode.CONCURRENT_TRANSACTIONS
        assert txn_broker.call(lambda: coordinator.end_txn("gp-query-0-0", member[1], member[2], False, 3)) \
            == ErrorCode.CONCURRENT_TRANSACTIONS
        assert wire.abort_by_prefix("gp-query-0-").aborted == []
        wait_for(lambda: wire.transaction("gp-loose-0-0")[0] == "CompleteAbort", what="the timeout abort")
        assert wire.transaction("gp-query-0-0")[0] == "Ongoing"
        assert txn_broker.call(lambda: coordinator.describe("gp-query-0-0").state) is TransactionState.ONGOING
        assert not answers  # the commit answers only once its markers are written
    finally:
        loop.call_soon_threadsafe(lambda: gate.done() or gate.set_result(None))
        committer.join(60)
        groups._commit_member = original
    [response] = answers
    assert (response.error_code, response.already_committed, response.last_committed_sequence) == (0, False, 3)
    assert not txn_broker.call(lambda: groups.is_pinned("gp-query-0-0"))
    assert read_committed(bootstrap, [("gp-out", 0)]) == {("gp-out", 0): [b"pinned"]}
    for producer in (pinned_producer, loose):
        producer.flush(1)


@pytest.mark.slow
def test_broker_killed_after_the_commit_point_rolls_forward(tmp_path, monkeypatch):
    """A test-only switch SIGKILLs the broker right after the group's commit-point record is durable,
    before any member is touched. The restarted broker must commit every member, exactly once."""
    monkeypatch.setenv("EOSLOG_ALLOW_TEST_FAULTS", "1")
    fault = "eoslog.test.crash.after.group.commit.record"
    with BrokerProcess(data_dir=tmp_path / "data", properties={fault: "true"}) as broker:
        bootstrap = broker.bootstrap
        create_topics(bootstrap, {"gk-out": 3})
        tps = [("gk-out", p) for p in range(3)]
        writes = {f"gk-query-4-{p}": {("gk-out", p): [f"p{p}-{i}".encode() for i in range(5)]} for p in range(3)}
        producers = [open_transaction(bootstrap, tid, w) for tid, w in writes.items()]
        wire = Wire(bootstrap)
        members = [identity(wire, tid) for tid in writes]
        with pytest.raises((ConnectionError, OSError)):
            wire.commit("gk-query", 4, members)
        assert broker.process.wait(30) == -9  # it killed itself at the commit point
        wire.close()

        del broker.properties[fault]
        broker.start()
        wire = Wire(bootstrap)
        for tid in writes:
            wait_for(lambda tid=tid: wire.transaction(tid)[0] == "CompleteCommit", what=f"roll-forward of {tid}")
        assert wire.describe_groups("gk-query")[0].last_committed_sequence == 4
        expected = {("gk-out", p): [f"p{p}-{i}".encode() for i in range(5)] for p in range(3)}
        assert read_committed(bootstrap, tps) == expected
        # The client retries the commit it never heard back from: already committed, nothing aborted.
        retry = wire.commit("gk-query", 4, members)
        assert (retry.error_code, retry.already_committed, retry.last_committed_sequence) == (0, True, 4)
        assert all(wire.transaction(tid)[0] == "CompleteCommit" for tid in writes)
        # Exactly once, also after a second (clean) restart that reloads the completed group.
        wire.close()
        broker.restart(hard=False)
        wire = Wire(bootstrap)
        assert wire.describe_groups("gk-query")[0].last_committed_sequence == 4
        assert read_committed(bootstrap, tps) == expected
        everything = READERS["confluent"](bootstrap, tps, "read_uncommitted")
        assert everything == expected  # no duplicate data either
        wire.close()
        for producer in producers:
            producer.flush(1)


def test_the_spark_sink_client_against_the_broker(txn_broker, wire):
    """eoslog.client.txn_groups (the generated codec, ApiVersions + FindCoordinator first) drives the
    three APIs on the real broker."""
    from eoslog.client.txn_groups import (
        TxnGroupClient,
        TxnGroupError,
        TxnMember,
        broker_supports_txn_groups,
    )

    bootstrap = txn_broker.bootstrap
    create_topics(bootstrap, {"gs-out": 1})
    assert broker_supports_txn_groups(bootstrap)
    producers = [open_transaction(bootstrap, f"gs-query-0-{i}", {("gs-out", 0): [b"gs-%d" % i]}) for i in range(2)]
    straggler = open_transaction(bootstrap, "gs-query-0-9", {("gs-out", 0): [b"gs-straggler"]})
    members = [TxnMember(*identity(wire, f"gs-query-0-{i}")) for i in range(2)]
    with TxnGroupClient(bootstrap, timeout_s=30) as client:
        assert client.last_committed("gs-query") == -1
        response = client.commit("gs-query", 0, members, abort_prefix="gs-query-")
        assert (response.error_code, response.already_committed, response.last_committed_sequence,
                response.aborted_by_prefix) == (0, False, 0, 1)
        assert client.last_committed("gs-query") == 0
        assert client.commit("gs-query", 0, members).already_committed
        late = open_transaction(bootstrap, "gs-query-1-0", {("gs-out", 0): [b"gs-late"]})
        assert client.abort_by_prefix("gs-query-1-") == ("gs-query-1-0",)
        with pytest.raises(TxnGroupError):  # validation failure: non-retriable, raised
            client.commit("gs-query", 1, [TxnMember("gs-query-1-0", members[0].producer_id, 0)])
    assert sorted(read_committed(bootstrap, [("gs-out", 0)])[("gs-out", 0)]) == [b"gs-0", b"gs-1"]
    for producer in [*producers, straggler, late]:
        producer.flush(1)


def test_the_spark_sink_client_learns_the_transaction_state_partitions_of_a_new_broker(tmp_path):
    """On a broker that has never seen a transactional request, FindCoordinator for a transactional id
    creates ``__transaction_state`` (as Kafka's does), so the sink client's next Metadata names its
    partitions. Before, the topic appeared only with the first InitProducerId: the client polled until
    its timeout and the sink got None: a 30 s stall at the first micro-batch of the first query on
    such a broker (the demo's)."""
    from eoslog.client.txn_groups import TRANSACTION_STATE, TxnGroupClient

    properties = {"transaction.state.log.num.partitions": "7"}
    with EmbeddedBroker(data_dir=tmp_path / "data", properties=properties) as broker:
        wire = Wire(broker.bootstrap)
        try:
            topics = wire.call(3, messages.MetadataRequest(topics=None, allow_auto_topic_creation=False), 4).topics
            assert TRANSACTION_STATE not in {t.name for t in topics}  # a new broker: not there yet
        finally:
            wire.close()
        with TxnGroupClient(broker.bootstrap, timeout_s=5) as client:
            assert client.transaction_state_partitions("eoslog-sink-new") == 7


def test_the_spark_sink_client_asks_the_next_bootstrap_server_when_one_dies_mid_answer(txn_broker):
    """The first server of the bootstrap list accepts connections but cuts every one mid-request, as a
    broker SIGKILLed while answering does: the client asks the next one. Before, ApiVersions (whether the
    broker has transaction groups) was asked of the first server that accepted, once: the sink's probe
    failed, the driver named that micro-batch's transactions without colocating them with their group,
    and on a cluster the batch's commit was refused with INVALID_REQUEST."""
    from eoslog.client.txn_groups import TxnGroupClient
    from eoslog.tools.local.faultproxy import FaultProxy

    host, _, port = txn_broker.bootstrap.rpartition(":")
    dying = FaultProxy(host, int(port), cut_rate=1.0, seed=18)
    dying_port = dying.start_in_thread()
    try:
        with TxnGroupClient(txn_broker.bootstrap, timeout_s=5) as client:
            partitions = client.transaction_state_partitions("eoslog-sink-dying")
        assert partitions
        bootstrap = f"127.0.0.1:{dying_port},{txn_broker.bootstrap}"
        with TxnGroupClient(bootstrap, timeout_s=5) as client:
            assert client.supported()
        with TxnGroupClient(bootstrap, timeout_s=5) as client:
            assert client.transaction_state_partitions("eoslog-sink-dying") == partitions
        assert dying.counters.cuts >= 2  # both clients did meet the dying server first
    finally:
        dying.stop()


def test_list_transaction_groups(txn_broker, wire):
    """ListTransactionGroups (0x7E03): every group with its state, last sequence and the members of that
    commit; advertised in ApiVersions; filtered by state."""
    bootstrap = txn_broker.bootstrap
    create_topics(bootstrap, {"gl-out": 2})
    assert (0x7E03, 0, 0) in {(a.api_key, a.min_version, a.max_version)
                              for a in wire.call(18, messages.ApiVersionsRequest()).api_keys}
    prefix = "eoslog-sink-gl-q-"
    producers = [open_transaction(bootstrap, f"{prefix}4-{p}", {("gl-out", p): [b"x"]}) for p in range(2)]
    members = [identity(wire, f"{prefix}4-{p}") for p in range(2)]
    before = int(time.time() * 1000)
    assert wire.commit("eoslog-sink-gl-q", 4, members, abort_prefix=prefix).error_code == 0
    listed = wire.list_groups()
    assert listed.error_code == 0 and listed.unknown_state_filters == []
    [group] = [g for g in listed.groups if g.group_name == "eoslog-sink-gl-q"]
    assert (group.state, group.decision_in_flight, group.last_committed_sequence) == ("CompleteCommit", False, 4)
    assert before <= group.last_commit_timestamp_ms <= int(time.time() * 1000)
    assert [(m.transactional_id, m.producer_id, m.producer_epoch) for m in group.members] == members
    assert [g.group_name for g in listed.groups] == sorted(g.group_name for g in listed.groups)
    assert "eoslog-sink-gl-q" in [g.group_name for g in wire.list_groups("CompleteCommit").groups]
    assert wire.list_groups("PrepareCommit").groups == []
    unknown = wire.list_groups("Ongoing")
    assert (unknown.unknown_state_filters, unknown.groups) == (["Ongoing"], [])
    for producer in producers:
        producer.flush(1)
