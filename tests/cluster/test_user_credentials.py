"""Users' SCRAM credentials on a cluster: the znodes' layout (pure), the broker's login settings (pure),
and the in-memory copy (cluster/user_credentials.py) against a real ZooKeeper: changes by another client,
a concurrent change to the same user, and an expired session."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from kazoo.client import KazooClient

from eoslog.cluster.user_credentials import ClusterCredentials
from eoslog.cluster.zk import layout
from eoslog.cluster.zk.client import ZooKeeper
from eoslog.security.credentials import altered_config
from eoslog.security.jaas import jaas_option
from eoslog.security.scram import ScramCredential
from eoslog.server.config import BrokerConfig, ConfigError
from eoslog.server.inter_broker import InterBrokerError, client_security
from eoslog.server.listeners import Listener

CREDENTIAL = ScramCredential.from_password("SCRAM-SHA-512", "secret", salt=b"s" * 32)


def test_user_znodes_are_kafkas():
    assert layout.user_config_path("alice") == "/config/users/alice"
    # Kafka's Sanitizer: URL-encoding, so a name cannot nest or be a wildcard.
    assert layout.user_config_path("CN=a/b*c d~") == "/config/users/CN%3Da%2Fb%2Ac%20d%7E"
    assert layout.desanitize_entity_name("CN%3Da%2Fb%2Ac%20d%7E") == "CN=a/b*c d~"
    data = layout.encode_entity_config({"SCRAM-SHA-512": CREDENTIAL.to_kafka_string()})
    assert json.loads(data) == {"version": 1, "config": {"SCRAM-SHA-512": CREDENTIAL.to_kafka_string()}}
    assert layout.decode_entity_config("p", data) == {"SCRAM-SHA-512": CREDENTIAL.to_kafka_string()}
    assert json.loads(layout.encode_config_change(layout.user_entity_path("a/b"))) == {
        "version": 2, "entity_path": "users/a%2Fb"}
    with pytest.raises(layout.LayoutError):
        layout.decode_entity_config("p", b"[]")


def test_a_change_keeps_what_is_not_scram():
    config = {"producer_byte_rate": "1024", "SCRAM-SHA-256": "old"}
    assert altered_config(config, {"SCRAM-SHA-512": CREDENTIAL, "SCRAM-SHA-256": None}) == {
        "producer_byte_rate": "1024", "SCRAM-SHA-512": CREDENTIAL.to_kafka_string()}


def test_jaas_options():
    jaas = r'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="a\"b\\c";'
    assert (jaas_option(jaas, "username"), jaas_option(jaas, "password")) == ("broker", 'a"b\\c')
    assert jaas_option(jaas, "user") is None


def test_the_brokers_login_properties():
    config = BrokerConfig()
    config.apply_properties({"listener.name.internal.scram-sha-512.sasl.jaas.config": "x required;",
                             "listener.name.internal.plain.sasl.jaas.config": "x required;"})
    for refused in ("listener.name.internal.gssapi.sasl.jaas.config", "sasl.jaas.config",
                    "listener.name.internal.scram-sha-512.sasl.jaas"):
        with pytest.raises(ConfigError, match="unknown broker property"):
            BrokerConfig().apply_properties({refused: "x"})
    internal = Listener("INTERNAL", "127.0.0.1", 9093, "SASL_PLAINTEXT")
    login = {"listener.name.internal.scram-sha-512.sasl.jaas.config": 'X required username="b" password="p";'}
    assert client_security("SASL_PLAINTEXT", login, internal)[1] is not None  # default SCRAM-SHA-512
    errors = {
        "not in the listener's enabled mechanisms": {**login, "sasl.enabled.mechanisms": "SCRAM-SHA-256"},
        "set listener.name.internal.plain.sasl.jaas.config": {"sasl.mechanism.inter.broker.protocol": "PLAIN",
                                                              "sasl.enabled.mechanisms": "PLAIN"},
        "needs username": {"listener.name.internal.scram-sha-512.sasl.jaas.config": 'X required username="b";'},
    }
    for message, properties in errors.items():
        with pytest.raises(InterBrokerError, match=message):
            client_security("SASL_PLAINTEXT", properties, internal)


def wait_for(condition, timeout: float, what: str):
    async def waiting():
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
            await asyncio.sleep(0.02)
    return waiting()


def test_every_change_reaches_the_copy_even_after_the_session_expired(zookeeper):
    connect = zookeeper.connect_string + "/eoslog"

    async def scenario():
        broker_zk, tool_zk = ZooKeeper(connect, 4000), ZooKeeper(connect, 4000)
        await asyncio.to_thread(broker_zk.start)
        await asyncio.to_thread(tool_zk.start)
        users = ClusterCredentials(broker_zk)
        await users.start()
        try:
            assert users.users() == []

            def set_password(user: str, mechanism: str, password: str) -> None:
                credential = ScramCredential.from_password(mechanism, password)
                tool_zk.alter_user(user, lambda config: altered_config(config, {mechanism: credential}))

            await asyncio.to_thread(set_password, "alice", "SCRAM-SHA-512", "one")
            await wait_for(lambda: users.lookup("alice", "SCRAM-SHA-512") is not None, 5, "alice seen")
            assert users.lookup("alice", "SCRAM-SHA-512").verify_password("one")

            # Two writers changing the same user at once: both changes count (conditional writes).
            await asyncio.gather(asyncio.to_thread(set_password, "alice", "SCRAM-SHA-256", "two"),
                                 users.alter({"alice": {"SCRAM-SHA-512": ScramCredential.from_password(
                                     "SCRAM-SHA-512", "three")}}))
            # alter() answers once this copy has read its own write.
            assert users.lookup("alice", "SCRAM-SHA-512").verify_password("three")
            await wait_for(lambda: set(users.credentials_of("alice")) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}, 5,
                           "both of alice's mechanisms")

            # Expire the broker's session (another client closes it), wait for the new one, then change.
            session_id, password = broker_zk.client.client_id
            thief = KazooClient(hosts=connect, client_id=(session_id, password), timeout=4)
            await asyncio.to_thread(thief.start, 10)
            await asyncio.to_thread(thief.stop)
            await wait_for(lambda: broker_zk.connected and broker_zk.client.client_id[0] != session_id, 20,
                           "a new session")
            await asyncio.to_thread(set_password, "bob", "SCRAM-SHA-512", "four")
            await wait_for(lambda: users.lookup("bob", "SCRAM-SHA-512") is not None, 5,
                           "bob seen through the new session's watch")
            await asyncio.to_thread(tool_zk.alter_user, "bob", lambda config: {})
            await wait_for(lambda: users.credentials_of("bob") == {}, 5, "bob deleted")
            assert await asyncio.to_thread(tool_zk.client.exists, layout.user_config_path("bob")) is None
        finally:
            await users.stop()
            await asyncio.to_thread(broker_zk.stop)
            await asyncio.to_thread(tool_zk.stop)

    asyncio.run(scenario())
