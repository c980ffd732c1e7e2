"""CreateTopics, CreatePartitions and DeleteTopics make and remove partition files (mkdir, four files per
partition, fsync, rmtree: 1-4 s for 1,000 partitions) in a worker thread, so the broker serves everyone
else meanwhile; nobody sees a topic half made; and a crash before topics.json names a new topic leaves
nothing behind (docs/benchmarks.md, "Creating and deleting 1,000 partitions off the event loop").

A real broker in this process, so the test can hold the worker thread at a gate instead of timing it,
and real clients over TCP."""

from __future__ import annotations

import os
import threading

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from eoslog.client.connection import BrokerConnection
from eoslog.log.config import LogConfig
from eoslog.log.manager import LogDirectory
from eoslog.protocol import messages
from eoslog.protocol.errors import ErrorCode
from eoslog.testing.embedded import EmbeddedBroker
from eoslog.testing.process import BrokerProcess
from eoslog.testing.wait import wait_until

LOOP_THREAD = "eoslog-embedded"  # EmbeddedBroker's event-loop thread


class Gate:
    """Holds a LogDirectory method for one topic until opened, noting the thread it ran on; ``armed``
    False lets calls through."""

    def __init__(self, monkeypatch, method: str, topic: str, armed: bool = True) -> None:
        self.armed = armed
        self.entered = threading.Event()
        self.opened = threading.Event()
        self.threads: list[str] = []
        original = getattr(LogDirectory, method)

        def held(directory, *args):
            names = args[0] if method == "remove_detached" else [args[0]]
            if self.armed and any(os.path.basename(str(name)).startswith(topic) for name in names):
                self.threads.append(threading.current_thread().name)
                self.entered.set()
                assert self.opened.wait(60), "the test never opened the gate"
            return original(directory, *args)

        monkeypatch.setattr(LogDirectory, method, held)


def metadata(bootstrap: str, *topics: str) -> dict[str, tuple[int, int]]:
    """Metadata v12 with auto-creation allowed: topic -> (error code, partition count)."""
    request = messages.MetadataRequest(
        topics=[messages.MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
        allow_auto_topic_creation=True, include_topic_authorized_operations=False)
    wire = BrokerConnection.from_bootstrap(bootstrap)
    try:
        response = wire.request(3, 12, request)
    finally:
        wire.close()
    return {t.name: (t.error_code, len(t.partitions)) for t in response.topics}


def produce_one(bootstrap: str, topic: str, partition: int, value: bytes) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    delivered = []
    producer.produce(topic, value, partition=partition, on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(30) == 0
    assert delivered == [None]


def read_all(bootstrap: str, topic: str, partition: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "gate-test", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, partition, 0)])
    values = []
    try:
        while (message := consumer.poll(5)) is not None:
            assert message.error() is None, message.error()
            values.append(message.value())
    finally:
        consumer.close()
    return values


def test_the_broker_serves_while_a_new_topics_files_are_made(monkeypatch):
    gate = Gate(monkeypatch, "make_logs", "big")
    with EmbeddedBroker() as embedded:
        bootstrap = embedded.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        created = admin.create_topics([NewTopic("big", 20, 1)], request_timeout=90)["big"]
        assert gate.entered.wait(30), "CreateTopics never reached make_logs"
        # Held in a worker: the loop answers, auto-creates and writes another topic meanwhile, and the
        # half-made topic is not visible (a client asking to auto-create it is told to come back).
        assert metadata(bootstrap, "big") == {"big": (ErrorCode.LEADER_NOT_AVAILABLE, 0)}
        produce_one(bootstrap, "small", 0, b"written while big was being made")
        assert read_all(bootstrap, "small", 0) == [b"written while big was being made"]
        assert not created.done()
        assert gate.threads and LOOP_THREAD not in gate.threads
        gate.opened.set()
        created.result(30)
        assert metadata(bootstrap, "big") == {"big": (0, 20)}
        produce_one(bootstrap, "big", 19, b"last partition")
        assert read_all(bootstrap, "big", 19) == [b"last partition"]


def test_partitions_are_added_and_a_topic_deleted_off_the_loop(monkeypatch):
    grow = Gate(monkeypatch, "make_logs", "grown", armed=False)
    remove = Gate(monkeypatch, "remove_detached", "grown")
    with EmbeddedBroker() as embedded:
        bootstrap = embedded.bootstrap
        data_dir = embedded.config.data_dir
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("grown", 2, 1)])["grown"].result(30)
        grow.armed = True

        added = admin.create_partitions([NewPartitions("grown", 5)], request_timeout=90)["grown"]
        assert grow.entered.wait(30)
        assert metadata(bootstrap, "grown") == {"grown": (0, 2)}  # the old count until the files exist
        produce_one(bootstrap, "other", 0, b"served meanwhile")
        grow.opened.set()
        added.result(30)
        assert metadata(bootstrap, "grown") == {"grown": (0, 5)}
        produce_one(bootstrap, "grown", 4, b"in a new partition")

        deleted = admin.delete_topics(["grown"], request_timeout=90)["grown"]
        assert remove.entered.wait(30)
        # Gone for clients as soon as topics.json says so; its directories renamed aside, not yet removed.
        assert not any(name.startswith("grown-") and not name.endswith("-delete") for name in os.listdir(data_dir))
        assert any(name.startswith("grown-") and name.endswith("-delete") for name in os.listdir(data_dir))
        produce_one(bootstrap, "other", 0, b"served while grown was removed")
        assert LOOP_THREAD not in remove.threads + grow.threads
        remove.opened.set()
        deleted.result(30)
        assert not any(name.startswith("grown") for name in os.listdir(data_dir))
        assert read_all(bootstrap, "other", 0) == [b"served meanwhile", b"served while grown was removed"]


def test_files_made_for_a_topic_that_never_reached_topics_json_are_removed_at_start(tmp_path):
    data_dir = tmp_path / "data"
    with BrokerProcess(data_dir=data_dir) as broker:
        produce_one(broker.bootstrap, "kept", 0, b"kept")
    # A crash between make_logs and topics.json: the directories exist, the registry does not name them.
    directory = LogDirectory.open(str(data_dir))
    directory.make_logs("ghost", range(3), LogConfig())
    directory.close()
    assert {"ghost-0", "ghost-1", "ghost-2"} <= set(os.listdir(data_dir))
    with BrokerProcess(data_dir=data_dir) as broker:
        assert not any(name.startswith("ghost") for name in os.listdir(data_dir))
        assert read_all(broker.bootstrap, "kept", 0) == [b"kept"]
        produce_one(broker.bootstrap, "ghost", 0, b"a new ghost starts empty")
        assert read_all(broker.bootstrap, "ghost", 0) == [b"a new ghost starts empty"]


def test_a_topic_is_made_even_when_its_client_hangs_up_while_the_files_are_made(monkeypatch):
    gate = Gate(monkeypatch, "make_logs", "abandoned")
    with EmbeddedBroker() as embedded:
        bootstrap = embedded.bootstrap
        wire = BrokerConnection.from_bootstrap(bootstrap)
        port = wire.sock.getsockname()[1]
        c = messages.CreateTopicsRequest
        wire.send(19, 7, c(timeout_ms=60_000, validate_only=False, topics=[
            c.CreatableTopic(name="abandoned", num_partitions=4, replication_factor=1, assignments=[], configs=[])]))
        assert gate.entered.wait(30)
        wire.close()  # the broker cancels the request's handler when it sees the connection go
        wait_until(lambda: not [c for c in embedded.broker.dispatcher.connections if c.peer.endswith(f":{port}")],
                   30, "the broker to notice the hang-up")
        gate.opened.set()
        # Made to the end all the same: served, and not made twice (its directories were not left behind
        # to make a second attempt fail on them).
        wait_until(lambda: metadata(bootstrap, "abandoned") == {"abandoned": (0, 4)}, 30, "the topic")
        admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the answer is in
        error = admin.create_topics([NewTopic("abandoned", 4, 1)])["abandoned"].exception(30)
        assert error is not None and error.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
        produce_one(bootstrap, "abandoned", 3, b"after the hang-up")
        assert read_all(bootstrap, "abandoned", 3) == [b"after the hang-up"]
