"""Several listeners on a cluster (issue 15, the listeners step): three real brokers and a real ZooKeeper.

Every broker serves EXTERNAL (PLAINTEXT, the primary), INTERNAL (SSL, client certificates required,
``inter.broker.listener.name``) and CLIENT (SSL, client certificates required). Each registers all three
in ZooKeeper as Kafka does; a client is told every broker's endpoint of the listener it came in on;
replica fetches, transaction markers and KIP-890 verifications go broker to broker over INTERNAL's TLS.
Which port each broker's sockets are connected to is read from /proc, so a broker that reached another
through the wrong listener fails the test even where that listener would have worked.
"""

from __future__ import annotations

import json
import os
import time

import confluent_kafka
import pytest
from cluster_helpers import commit_abort_commit, create_topic, wait_replicas_identical
from confluent_kafka.admin import AdminClient

from eoslog.cluster.zk import layout
from eoslog.server.broker import Broker
from eoslog.server.config import BrokerConfig, ConfigError
from eoslog.testing.certs import make_certs
from eoslog.testing.cluster import embedded_cluster
from eoslog.testing.process import BrokerProcess, free_port
from eoslog.testing.wait import wait_until

pytestmark = pytest.mark.interop
LISTENERS = ("EXTERNAL", "INTERNAL", "CLIENT")


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("certs"), ("alice",))


@pytest.fixture(scope="module")
def cluster(certs, tmp_path_factory):
    ports: dict[int, dict[str, int]] = {}

    def listeners(broker_id: int, port: int) -> dict[str, str]:
        ports[broker_id] = {"EXTERNAL": port, "INTERNAL": free_port(), "CLIENT": free_port()}
        return {"listeners": ",".join(f"{name}://127.0.0.1:{p}" for name, p in ports[broker_id].items())}

    properties = {
        "listener.security.protocol.map": "EXTERNAL:PLAINTEXT,INTERNAL:SSL,CLIENT:SSL",
        "inter.broker.listener.name": "INTERNAL",
        "ssl.keystore.location": str(certs.broker),
        "ssl.truststore.location": str(certs.ca),
        "ssl.client.auth": "required",
        "replica.lag.time.max.ms": "10000",
    }
    with embedded_cluster(3, tmp_path_factory.mktemp("listeners"), properties=properties,
                          broker_properties=listeners) as running:
        running.ports = ports
        yield running


def client_config(cluster, certs, listener: str, broker_id: int = 1) -> dict:
    config = {"bootstrap.servers": f"127.0.0.1:{cluster.ports[broker_id][listener]}"}
    if listener != "EXTERNAL":
        config.update({"security.protocol": "ssl", "ssl.ca.location": str(certs.ca),
                       "ssl.certificate.location": str(certs.client_cert("alice")),
                       "ssl.key.location": str(certs.client_key("alice"))})
    return config


def connected_ports(pid: int) -> set[int]:
    """The remote ports of the process's established TCP connections (its sockets matched to /proc/net/tcp)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as lines:
            next(lines)
            for line in lines:
                fields = line.split()
                if fields[3] == "01" and fields[9] in inodes:  # 01: ESTABLISHED
                    ports.add(int(fields[2].rsplit(":", 1)[1], 16))
    return ports



def assert_brokers_talk_only_over_internal(cluster) -> None:
    client_ports = {p[name] for p in cluster.ports.values() for name in ("EXTERNAL", "CLIENT")}
    for broker_id, broker in cluster.brokers.items():
        assert not connected_ports(broker.process.pid) & client_ports, f"broker {broker_id} used a client listener"


def test_every_listener_is_registered_as_kafka_registers_it(cluster):
    for broker_id, ports in cluster.ports.items():
        written = json.loads(cluster._client().get(layout.broker_path(broker_id))[0])
        assert written["endpoints"] == [f"{name}://127.0.0.1:{ports[name]}" for name in LISTENERS]
        assert written["listener_security_protocol_map"] == {"EXTERNAL": "PLAINTEXT", "INTERNAL": "SSL",
                                                             "CLIENT": "SSL"}
        # host and port: the PLAINTEXT endpoint, for readers that know nothing else
        assert (written["host"], written["port"], written["version"]) == ("127.0.0.1", ports["EXTERNAL"], 5)


def test_replication_goes_over_the_tls_inter_broker_listener(cluster):
    create_topic(cluster, "replicated", 1, 3, {"min.insync.replicas": "3"})
    producer = confluent_kafka.Producer({**client_config(cluster, None, "EXTERNAL"), "acks": "all", "linger.ms": 5})
    errors = []
    sent = [f"value-{i:04d}".encode() for i in range(300)]
    for value in sent:
        producer.produce("replicated", value, on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(60) == 0
    # min.insync.replicas=3: each acknowledgement needed both followers to have fetched the record.
    assert errors == [None] * len(sent)
    state = cluster.state()
    leader = state.leader_of("replicated", 0)
    assert sorted(state.isr_of("replicated", 0)) == [1, 2, 3]
    wait_replicas_identical(cluster, "replicated", 0, timeout=30)
    consumer = confluent_kafka.Consumer({**client_config(cluster, None, "EXTERNAL", 2), "group.id": "replicated",
                                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition("replicated", 0, 0)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < len(sent) and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            got.append(message.value())
    consumer.close()
    assert got == sent
    # The followers fetch from the leader's INTERNAL port; no broker talks to another's other listeners.
    internal = cluster.ports[leader]["INTERNAL"]
    followers = [cluster.broker(b) for b in cluster.brokers if b != leader]
    wait_until(lambda: all(internal in connected_ports(f.process.pid) for f in followers), 10,
               f"the followers connected to broker {leader}'s INTERNAL listener")
    assert_brokers_talk_only_over_internal(cluster)


@pytest.mark.parametrize("listener", LISTENERS)
def test_each_listener_advertises_its_own_endpoints_of_every_broker(cluster, certs, listener):
    expected = {b: ("127.0.0.1", ports[listener]) for b, ports in cluster.ports.items()}
    admin = AdminClient(client_config(cluster, certs, listener, broker_id=2))
    metadata = admin.list_topics(timeout=30)
    assert {b.id: (b.host, b.port) for b in metadata.brokers.values()} == expected
    described = admin.describe_cluster(request_timeout=30).result(30)
    assert {n.id: (n.host, n.port) for n in described.nodes} == expected


def test_transactions_over_a_tls_client_listener_with_markers_between_brokers(cluster, certs):
    create_topic(cluster, "ledger", 3, 3)
    leaders = {cluster.state().leader_of("ledger", p) for p in range(3)}
    assert len(leaders) > 1  # whoever coordinates, some partition is led elsewhere: its markers cross brokers
    config = client_config(cluster, certs, "CLIENT", broker_id=3)
    producer = confluent_kafka.Producer({**config, "transactional.id": "ledger-writer", "linger.ms": 5,
                                         "transaction.timeout.ms": 20000})
    producer.init_transactions(60)
    expected = commit_abort_commit(producer, "ledger", 3, 20)
    consumer = confluent_kafka.Consumer({**config, "group.id": "ledger-reader", "isolation.level": "read_committed",
                                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition("ledger", p, 0) for p in range(3)])
    got = {p: [] for p in range(3)}
    deadline = time.monotonic() + 60
    while sum(map(len, got.values())) < 120 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            got[message.partition()].append(message.value())
    # The group's coordinator, found through the CLIENT listener, is given by its CLIENT endpoint.
    consumer.commit(offsets=[confluent_kafka.TopicPartition("ledger", 0, 1)], asynchronous=False)
    consumer.close()
    assert got == expected
    admin = AdminClient(config)  # kept alive: a collected client drops its requests
    group = admin.describe_consumer_groups(["ledger-reader"])["ledger-reader"].result(30)
    assert group.coordinator.port == cluster.ports[group.coordinator.id]["CLIENT"]
    assert_brokers_talk_only_over_internal(cluster)  # the markers and verifications too


def cluster_config(**properties: str) -> BrokerConfig:
    config = BrokerConfig()
    config.apply_properties({"zookeeper.connect": "127.0.0.1:1", "listeners": "EXTERNAL://127.0.0.1:0,"
                             "INTERNAL://127.0.0.1:0", "listener.security.protocol.map":
                             "EXTERNAL:PLAINTEXT,INTERNAL:SSL,SASL_SSL:SASL_SSL", **properties})
    return config


def test_inter_broker_listener_configuration_errors(tmp_path):
    with pytest.raises(ConfigError, match=r"inter.broker.listener.name=NOPE: no listener of that name in "
                                          r"listeners \(EXTERNAL, INTERNAL\)"):
        Broker(cluster_config(**{"inter.broker.listener.name": "nope"}))
    with pytest.raises(ConfigError, match="not both"):
        Broker(cluster_config(**{"inter.broker.listener.name": "INTERNAL", "security.inter.broker.protocol": "SSL"}))
    with pytest.raises(ConfigError, match=r"logs in with SCRAM-SHA-512: set "
                                          r"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config="):
        Broker(cluster_config(**{"listeners": "EXTERNAL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
                                 "inter.broker.listener.name": "SASL_SSL"}))
    with pytest.raises(ConfigError, match="ssl.keystore.location=/nonexistent"):
        Broker(cluster_config(**{"inter.broker.listener.name": "INTERNAL", "ssl.keystore.location": "/nonexistent"}))
    # Kafka's older property names the listener after a protocol; by default the first listener is used.
    assert cluster_config(**{"security.inter.broker.protocol": "SASL_SSL",
                             "listeners": "EXTERNAL://127.0.0.1:0,SASL_SSL://127.0.0.1:0"}
                          ).inter_broker_listener().name == "SASL_SSL"
    assert cluster_config().inter_broker_listener().name == "EXTERNAL"
    # The real command refuses to start, saying why.
    process = BrokerProcess(data_dir=tmp_path / "data", properties={
        "zookeeper.connect": "127.0.0.1:1", "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}",
        "inter.broker.listener.name": "INTERNAL"})
    with pytest.raises(RuntimeError, match="configuration error: inter.broker.listener.name=INTERNAL"):
        process.start(timeout=30)


def test_a_broker_connects_to_a_tls_listener_with_its_certificate_and_checks_names_only_when_asked(certs, tmp_path):
    """BrokerClient over the link an SSL inter-broker listener makes, against a real broker on 127.0.0.2
    (loopback, but not a name in the broker's certificate) that requires client certificates."""
    import asyncio

    from eoslog.cluster.broker_client import BrokerClient, BrokerConnectionError
    from eoslog.protocol import messages
    from eoslog.server.inter_broker import inter_broker_link
    from eoslog.server.listeners import Listener

    port = free_port()
    properties = {"ssl.keystore.location": str(certs.broker), "ssl.truststore.location": str(certs.ca),
                  "ssl.client.auth": "required"}
    internal = Listener("INTERNAL", "127.0.0.2", port, "SSL")

    async def api_versions(link) -> int:
        client = BrokerClient("127.0.0.2", port, "eoslog-test", link)
        try:
            return (await client.request(18, 0, messages.ApiVersionsRequest(), 10)).error_code
        finally:
            client.close()

    with BrokerProcess(data_dir=tmp_path / "data", properties={
            **properties, "listeners": f"PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.2:{port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SSL"}):
        assert asyncio.run(api_versions(inter_broker_link(internal, properties))) == 0
        checking = inter_broker_link(internal, {**properties, "ssl.endpoint.identification.algorithm": "https"})
        with pytest.raises(BrokerConnectionError, match="CERTIFICATE_VERIFY_FAILED"):
            asyncio.run(api_versions(checking))
        no_certificate = inter_broker_link(internal, {"ssl.truststore.location": str(certs.ca)})
        with pytest.raises(BrokerConnectionError):
            asyncio.run(api_versions(no_certificate))
