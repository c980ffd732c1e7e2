"""The admin tools ask each partition leader once, not each partition: `topics describe` of a
multi-partition topic sends two Metadata and one ListOffsets per leader per (timestamp, isolation
level), three in all on a single node, and `transactions find-hanging` one DescribeProducers; counted
by the broker itself (its request metrics endpoint), while the answers stay per partition and match
what a Kafka client reads.
"""

from __future__ import annotations

import json
import socket
import threading

import click
import confluent_kafka
import pytest
from click.testing import CliRunner

from eoslog.protocol import messages
from eoslog.testing import metrics
from eoslog.testing.embedded import EmbeddedBroker
from eoslog.testing.wait import wait_until
from eoslog.tools.admin_requests import LATEST
from eoslog.tools.brokers import GROUP, Brokers
from eoslog.tools.hanging import hanging_transactions
from eoslog.tools.leader_requests import describe_producers, group_by_leader, list_offsets
from eoslog.tools.local.faultproxy import FaultProxy
from eoslog.tools.topics_cli import topics_group
from eoslog.tools.txn_cli import transactions_group

PARTITIONS = 12


def requests_total(broker: EmbeddedBroker, request: str) -> float:
    return metrics.requests_total(broker.broker.metrics.bound_port, request)


def run(group, *args: str) -> str:
    result = CliRunner().invoke(group, list(args))
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture
def metered(tmp_path):
    with EmbeddedBroker(data_dir=tmp_path / "data", properties={"eoslog.metrics.listen": "127.0.0.1:0"}) as broker:
        yield broker


def test_describe_and_find_hanging_send_one_request_per_leader(metered):
    bootstrap = metered.bootstrap
    run(topics_group, "create", "wide", "--partitions", str(PARTITIONS), "-b", bootstrap)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for p in range(PARTITIONS):
        for _ in range(p):  # partition p holds p records
            producer.produce("wide", value=b"x", partition=p)
    assert producer.flush(30) == 0
    open_txn = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": "per-leader"})
    open_txn.init_transactions(30)
    open_txn.begin_transaction()
    open_txn.produce("wide", value=b"open", partition=5)
    assert open_txn.flush(30) == 0

    before = requests_total(metered, "ListOffsets"), requests_total(metered, "Metadata")
    [view] = json.loads(run(topics_group, "describe", "wide", "-b", bootstrap, "--json"))
    assert requests_total(metered, "ListOffsets") - before[0] == 3  # earliest, latest, latest read_committed
    # the topic's (which names the leaders) and the broker list, to connect to them: none per partition
    assert requests_total(metered, "Metadata") - before[1] == 2
    rows = {p["partition"]: p for p in view["partitions"]}
    assert sorted(rows) == list(range(PARTITIONS))
    for p, row in rows.items():
        high = p + 1 if p == 5 else p
        assert (row["log_start_offset"], row["high_watermark"], row["error"]) == (0, high, None), row
        assert row["last_stable_offset"] == (5 if p == 5 else high), row  # the open transaction pins it

    before = requests_total(metered, "DescribeProducers")
    hanging = run(transactions_group, "find-hanging", "-b", bootstrap, "--max-age-ms", "0")
    assert requests_total(metered, "DescribeProducers") - before == 1
    assert "wide-5" in hanging  # open longer than 0 ms: reported, on its own partition only
    assert not any(f"wide-{p} " in hanging for p in range(PARTITIONS) if p != 5)
    open_txn.abort_transaction(30)


def test_a_leader_that_cannot_be_reached_is_reported_per_partition_not_as_a_failed_describe(tmp_path):
    # A broker that has not yet heard of a leader's stop names it in its Metadata (seen in a 3-broker run:
    # `topics describe` failed with ConnectionRefusedError). Here the only broker advertises a port
    # that is bound but not listening: every leader connection is refused, deterministically, while
    # Metadata and DescribeConfigs, which go to the broker the tool bootstrapped from, are answered.
    with EmbeddedBroker(data_dir=tmp_path / "data") as broker:  # created while the broker can be reached
        run(topics_group, "create", "far", "--partitions", "2", "--config", "retention.ms=60000",
            "-b", broker.bootstrap)
    with socket.socket() as dead:
        dead.bind(("127.0.0.1", 0))
        properties = {"advertised.listeners": f"PLAINTEXT://127.0.0.1:{dead.getsockname()[1]}"}
        with EmbeddedBroker(data_dir=tmp_path / "data", properties=properties) as broker:
            [view] = json.loads(run(topics_group, "describe", "far", "-b", broker.bootstrap, "--json"))
            assert view["configs"] == {"retention.ms": "60000"}
            assert [(p["partition"], p["leader"], p["high_watermark"], p["error"]) for p in view["partitions"]] == \
                [(0, 0, None, "NETWORK_EXCEPTION"), (1, 0, None, "NETWORK_EXCEPTION")]
            table = run(topics_group, "describe", "far", "-b", broker.bootstrap)
            assert table.splitlines()[1].split()[-1] == "ERROR" and "NETWORK_EXCEPTION" in table.splitlines()[2]


def test_a_leader_the_broker_list_no_longer_names_is_asked_again_after_a_fresh_metadata(tmp_path):
    # `topics describe` takes the leaders from one Metadata and the brokers' addresses from another (and
    # reuses the leaders for three ListOffsets): a leader that stopped in between is no longer listed
    # (seen under load: describe failed "broker 1 is not in the cluster's metadata" just after broker 1
    # stopped). Here the stale answer is given directly: broker 7 leads partition 0, and no broker 7 exists.
    with EmbeddedBroker(data_dir=tmp_path / "data") as broker:
        run(topics_group, "create", "gone", "--partitions", "2", "-b", broker.bootstrap)
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
        for partition in (0, 0, 1):
            producer.produce("gone", b"x", partition=partition)
        assert producer.flush(30) == 0
        with Brokers(broker.bootstrap) as brokers:
            offsets, errors = list_offsets(brokers, [("gone", 0), ("gone", 1)], LATEST,
                                           leader_of={("gone", 0): 7, ("gone", 1): 0})
            assert (offsets, errors) == ({("gone", 0): 2, ("gone", 1): 1}, {})
            active, errors = describe_producers(brokers, [("gone", 0)], leader_of={("gone", 0): 7})
            assert [len(ps) for ps in active.values()] == [1] and errors == {}


def test_a_coordinator_that_cannot_be_reached_is_looked_up_again_until_it_can(tmp_path):
    # FindCoordinator names a broker the tools cannot reach yet (as a broker that has not heard that the
    # coordinator stopped does): the lookup is asked again until the named broker answers, and a clear
    # error, not a ConnectionRefusedError traceback, when it never does within the timeout.
    with socket.socket() as dead:
        dead.bind(("127.0.0.1", 0))
        port = dead.getsockname()[1]
        properties = {"advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}", "eoslog.metrics.listen": "127.0.0.1:0"}
        with EmbeddedBroker(data_dir=tmp_path / "data", properties=properties) as broker:
            with Brokers(broker.bootstrap, timeout=1.0) as brokers, pytest.raises(click.ClickException) as refused:
                brokers.coordinator("far-group", GROUP)
            assert "no reachable coordinator within 1 s" in refused.value.message, refused.value.message
            assert "Connection refused" in refused.value.message, refused.value.message

            found: list = []
            with Brokers(broker.bootstrap, timeout=30.0) as brokers:
                asking = threading.Thread(target=lambda: found.append(brokers.coordinator("far-group", GROUP)))
                asking.start()
                wait_until(lambda: requests_total(broker, "FindCoordinator") >= 3, 30, "FindCoordinator asked again")
                dead.close()  # the named address starts answering: a proxy to the broker there
                proxy = FaultProxy("127.0.0.1", int(broker.bootstrap.rsplit(":", 1)[1]), listen_port=port)
                proxy.start_in_thread()
                try:
                    asking.join(30)
                    assert found and found[0].request(3, 4, messages.MetadataRequest(
                        topics=[], allow_auto_topic_creation=False)).brokers[0].port == port
                finally:
                    proxy.stop()


# ---- the pure parts -------------------------------------------------------------------------------

class Producer:
    def __init__(self, producer_id: int, start: int, last_timestamp: int = 1_000) -> None:
        self.producer_id, self.producer_epoch, self.coordinator_epoch = producer_id, 0, 0
        self.current_txn_start_offset, self.last_timestamp = start, last_timestamp


def test_partitions_are_grouped_by_leader_and_the_unaskable_kept_as_errors():
    leader_of = {("a", 0): 1, ("a", 1): 2, ("b", 0): 1, ("b", 1): -1}
    grouped, errors = group_by_leader([("a", 0), ("a", 1), ("b", 0), ("b", 1), ("c", 0)], leader_of)
    assert grouped == {1: {"a": [0], "b": [0]}, 2: {"a": [1]}}
    assert errors == {("b", 1): 5, ("c", 0): 3}  # LEADER_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION


def test_a_transaction_hangs_when_its_coordinator_does_not_cover_the_partition_or_it_is_too_old():
    active = {("t", 0): [Producer(7, 10), Producer(8, -1)], ("t", 1): [Producer(7, 3)],
              ("t", 2): [Producer(9, 4, last_timestamp=100)]}
    ongoing = {(7, "t", 0), (9, "t", 2)}
    found = hanging_transactions(active, ongoing, max_age_ms=500, now_ms=1_200)
    assert [(h["partition"], h["producer_id"], h["start_offset"]) for h in found] == [(1, 7, 3), (2, 9, 4)]
    # A check-back transaction being checked is older than any timeout on purpose: not hanging by age,
    # but still hanging where its coordinator does not cover the partition.
    checked = hanging_transactions(active, ongoing, max_age_ms=500, now_ms=1_200, checking=frozenset({(9, "t", 2)}))
    assert [(h["partition"], h["producer_id"]) for h in checked] == [(1, 7)]
