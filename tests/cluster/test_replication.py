"""A replicated cluster with real ZooKeeper, real broker processes and real clients: replication,
failover, ISR changes, min.insync.replicas (issue 13's tests 1, 2 and 4)."""

from __future__ import annotations

import threading
import time

import confluent_kafka
import confluent_kafka.admin
import pytest
from cluster_helpers import consume_all, create_topic, wait_replicas_identical

from eoslog.testing.cluster import embedded_cluster
from eoslog.testing.wait import wait_until

pytestmark = pytest.mark.interop


def test_replicas_hold_identical_bytes_and_consumers_read_everything(tmp_path):
    with embedded_cluster(3, tmp_path) as cluster:
        create_topic(cluster, "plain", 2, 3, {"min.insync.replicas": "2"})
        producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                                             "enable.idempotence": True, "linger.ms": 2})
        errors = []
        for i in range(2000):
            producer.produce("plain", value=b"%06d" % i, partition=i % 2,
                             on_delivery=lambda err, msg: err and errors.append(err))
        assert producer.flush(60) == 0
        assert errors == []
        got = consume_all(cluster.bootstrap, "plain", 2, 2000)
        assert got[0] == [b"%06d" % i for i in range(0, 2000, 2)]
        assert got[1] == [b"%06d" % i for i in range(1, 2000, 2)]
        for p in range(2):
            assert len(wait_replicas_identical(cluster, "plain", p)) > 0
        # Followers hold the leader's batches, leader epoch stamps included.
        state = cluster.state()
        assert all(len(state.isr_of("plain", p)) == 3 for p in range(2))


def test_min_insync_replicas_refuses_acks_all_when_two_of_three_are_down(tmp_path):
    with embedded_cluster(3, tmp_path) as cluster:
        create_topic(cluster, "strict", 1, 3, {"min.insync.replicas": "2"})
        leader = cluster.state().leader_of("strict", 0)
        others = [b for b in cluster.brokers if b != leader]
        for broker_id in others:
            cluster.broker(broker_id).kill()
        cluster.wait_for(lambda s: s.isr_of("strict", 0) == (leader,), 30, "ISR shrunk to the leader")
        # ZooKeeper's view first, the leader's own a moment later: a produce in between is appended (the
        # leader still counts three in the ISR) and only times out, as in Kafka. Wait for the leader too
        # (the only broker left to answer Metadata).
        seen_by_leader = confluent_kafka.admin.AdminClient({"bootstrap.servers": cluster.broker(leader).bootstrap})
        wait_until(lambda: tuple(seen_by_leader.list_topics("strict", timeout=10).topics["strict"].partitions[0].isrs)
                   == (leader,), 30, "the leader itself sees the ISR shrunk")
        producer = confluent_kafka.Producer({"bootstrap.servers": cluster.broker(leader).bootstrap, "acks": "all",
                                             "message.timeout.ms": 4000, "retry.backoff.ms": 200})
        outcome = []
        producer.produce("strict", value=b"must-not-be-acked", partition=0,
                         on_delivery=lambda err, msg: outcome.append(err))
        producer.flush(15)
        assert len(outcome) == 1 and outcome[0] is not None, outcome
        # librdkafka retries NOT_ENOUGH_REPLICAS until the message times out; the broker logged why.
        assert outcome[0].code() in (confluent_kafka.KafkaError.NOT_ENOUGH_REPLICAS,
                                     confluent_kafka.KafkaError._MSG_TIMED_OUT), outcome[0]
        # acks=1 is still served by the leader alone, as in Kafka.
        acks1 = confluent_kafka.Producer({"bootstrap.servers": cluster.broker(leader).bootstrap, "acks": 1})
        delivered = []
        acks1.produce("strict", value=b"acks-1", partition=0, on_delivery=lambda err, msg: delivered.append(err))
        acks1.flush(15)
        assert delivered == [None]
        # Once a follower is back and caught up, acks=all works again.
        cluster.broker(others[0]).start()
        cluster.wait_for(lambda s: len(s.isr_of("strict", 0)) == 2, 60, "a follower rejoined the ISR")
        again = []
        patient = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                                            "message.timeout.ms": 30000})
        patient.produce("strict", value=b"acked", partition=0, on_delivery=lambda err, msg: again.append(err))
        patient.flush(40)
        assert again == [None]
        values = consume_all(cluster.broker(leader).bootstrap, "strict", 1, 2)[0]
        assert b"acked" in values and b"acks-1" in values


def test_a_paused_follower_leaves_the_isr_and_rejoins_after_catching_up(tmp_path):
    with embedded_cluster(3, tmp_path, properties={"replica.lag.time.max.ms": "2000"},
                          session_timeout_ms=20_000) as cluster:
        create_topic(cluster, "lag", 1, 3, {"min.insync.replicas": "2"})
        state = cluster.state()
        leader = state.leader_of("lag", 0)
        follower = next(b for b in state.replicas[("lag", 0)] if b != leader)
        producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                                             "enable.idempotence": True, "linger.ms": 5})
        cluster.broker(follower).pause()
        try:
            started = time.monotonic()
            shrunk = cluster.wait_for(lambda s: follower not in s.isr_of("lag", 0), 30, "the paused follower left")
            left_after = time.monotonic() - started
            assert leader in shrunk.isr_of("lag", 0) and len(shrunk.isr_of("lag", 0)) == 2
            # acks=all goes on with 2 of 3 in sync.
            errors = []
            for i in range(500):
                producer.produce("lag", value=b"%05d" % i, partition=0,
                                 on_delivery=lambda err, msg: err and errors.append(err))
            assert producer.flush(60) == 0 and errors == []
        finally:
            cluster.broker(follower).resume()
        cluster.wait_for(lambda s: follower in s.isr_of("lag", 0), 60, "the follower rejoined")
        wait_replicas_identical(cluster, "lag", 0)
        print(f"paused follower left the ISR after {left_after:.1f} s (replica.lag.time.max.ms = 2 s)")
        assert left_after < 15


def _produce_confluent(bootstrap: str, topic: str, start: int, count: int, partitions: int, acked: set) -> None:
    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
        "message.timeout.ms": 120_000, "retry.backoff.ms": 100, "socket.timeout.ms": 5000,
        "topic.metadata.refresh.interval.ms": 1000})

    def on_delivery(err, msg):
        if err is None:
            acked.add(int(msg.value()))

    for i in range(start, start + count):
        while True:
            try:
                producer.produce(topic, value=b"%08d" % i, partition=i % partitions, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
        if i % 200 == 0:
            time.sleep(0.01)  # spread the stream over the failovers
    assert producer.flush(180) == 0


def _produce_kafka_python(bootstrap: str, topic: str, start: int, count: int, partitions: int, acked: set) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap.split(","), enable_idempotence=True, acks="all",
                             linger_ms=5, request_timeout_ms=5000, delivery_timeout_ms=120_000,
                             retry_backoff_ms=100, metadata_max_age_ms=1000)
    for i in range(start, start + count):
        producer.send(topic, b"%08d" % i, partition=i % partitions).add_callback(lambda _m, i=i: acked.add(i))
        if i % 200 == 0:
            time.sleep(0.01)
    producer.flush(180)
    producer.close(10)


def _produce_aiokafka(bootstrap: str, topic: str, start: int, count: int, partitions: int, acked: set) -> None:
    import asyncio

    from aiokafka import AIOKafkaProducer

    async def go():
        # aiokafka has no delivery timeout: a batch whose leader is unknown for request_timeout_ms
        # expires. A failover takes the 4 s session timeout and more, so 5 s (as the others use) lost a
        # batch now and then; 30 s lets it wait like the other clients' 120 s delivery timeouts.
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap.split(","), enable_idempotence=True, acks="all",
                                    linger_ms=5, request_timeout_ms=30_000, retry_backoff_ms=100,
                                    metadata_max_age_ms=1000)
        await producer.start()
        try:
            futures = []
            for i in range(start, start + count):
                future = await producer.send(topic, b"%08d" % i, partition=i % partitions)
                future.add_done_callback(lambda f, i=i: f.exception() is None and acked.add(i))
                futures.append(future)
                if i % 200 == 0:
                    await asyncio.sleep(0.01)
            await asyncio.gather(*futures, return_exceptions=True)
        finally:
            await producer.stop()

    asyncio.run(go())


PRODUCERS = (_produce_confluent, _produce_kafka_python, _produce_aiokafka)


def test_leader_killed_twice_in_a_row_loses_nothing_acknowledged(tmp_path):
    partitions, per_client = 2, 8000
    with embedded_cluster(3, tmp_path) as cluster:
        create_topic(cluster, "failover", partitions, 3, {"min.insync.replicas": "2"})
        acked: set[int] = set()
        # confluent-kafka, kafka-python and aiokafka, each with its own range of values.
        threads = [threading.Thread(target=produce, args=(
            cluster.bootstrap, "failover", c * per_client, per_client, partitions, acked))
            for c, produce in enumerate(PRODUCERS)]
        for t in threads:
            t.start()
        kills = []
        try:
            for round_ in range(2):
                deadline = time.monotonic() + 60
                while len(acked) < (round_ + 1) * per_client and time.monotonic() < deadline:
                    time.sleep(0.02)
                victim = cluster.state().leader_of("failover", 0)
                epoch = cluster.state().epoch_of("failover", 0)
                cluster.broker(victim).kill()
                killed_at = time.monotonic()
                cluster.wait_for(lambda s, victim=victim, epoch=epoch: s.leader_of("failover", 0) not in
                                 (None, -1, victim) and s.epoch_of("failover", 0) > epoch, 60, "a new leader")
                kills.append((victim, time.monotonic() - killed_at))
                cluster.broker(victim).start()
        finally:
            for t in threads:
                t.join(240)
        assert len(kills) == 2
        assert len(acked) == len(PRODUCERS) * per_client, "every record is eventually acknowledged"
        got = consume_all(cluster.bootstrap, "failover", partitions, len(acked), timeout=120)
        seen = []
        for p, values in got.items():
            numbers = [int(v) for v in values]
            for client in range(len(PRODUCERS)):  # each producer's records keep their send order
                own = [n for n in numbers if n // per_client == client]
                assert own == sorted(own), f"partition {p}: producer {client}'s records out of order"
            assert all(n % partitions == p for n in numbers)
            seen += numbers
        assert len(seen) == len(set(seen)), f"{len(seen) - len(set(seen))} duplicates"
        missing = acked - set(seen)
        assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:5]}"
        for p in range(partitions):
            wait_replicas_identical(cluster, "failover", p)
        print(f"failovers (victim, seconds to new leader): {kills}")
