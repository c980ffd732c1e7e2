"""Every broker of a three-broker cluster (real ZooKeeper, ``eoslog serve`` processes) serves the registry;
the one whose registry writes is SIGKILLed, and another broker's registry takes over with every id kept.
``_schemas`` is replicated as ``__transaction_state`` is. Then schema id validation on the cluster: a topic's
setting reaches its partitions' leaders through ZooKeeper, each checking against its own registry's state,
and so does payload validation's level."""

from __future__ import annotations

import json
import struct
import urllib.error
import urllib.request

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from eoslog.testing.cluster import EmbeddedCluster
from eoslog.testing.process import free_port
from eoslog.testing.wait import wait_until

pytestmark = pytest.mark.interop


def call(url: str, method: str, path: str, body: object = None) -> tuple[int | None, object]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data=data, method=method,
                                     headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")
    except OSError as exc:
        return None, str(exc)


def test_the_writers_broker_sigkilled_another_takes_over_with_every_id(tmp_path):
    ports = {broker_id: free_port() for broker_id in (1, 2, 3)}
    urls = {broker_id: f"http://127.0.0.1:{port}" for broker_id, port in ports.items()}

    def registry_on(broker_id: int, _port: int) -> dict[str, str]:
        return {"eoslog.schema.registry.listen": f"127.0.0.1:{ports[broker_id]}"}

    with EmbeddedCluster(tmp_path, 3, broker_properties=registry_on) as cluster:
        def writer_seen_by(broker_id: int) -> str | None:
            status, body = call(urls[broker_id], "GET", "/eoslog/writer")
            return body["writer"] if status == 200 and body["ready"] else None

        writer_url = wait_until(lambda: len({writer_seen_by(b) for b in urls}) == 1 and writer_seen_by(1), 90,
                                "the three registries agree on a writer")
        writer = next(b for b, url in urls.items() if url == writer_url)
        survivor = next(b for b in urls if b != writer)
        acked = {}
        for i in range(20):
            subject = f"cluster-{i}-value"
            schema = {"schema": json.dumps({"type": "enum", "name": "E", "symbols": [f"S{i}"]})}
            status, body = wait_until(lambda s=subject, b=schema: (r := call(urls[survivor], "POST",
                                      f"/subjects/{s}/versions", b))[0] == 200 and r, 30, f"registering {subject}")
            acked[subject] = body["id"]
        topic = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics("_schemas", timeout=10).topics
        assert len(topic["_schemas"].partitions[0].replicas) == 3

        cluster.broker(writer).kill()
        new_writer = wait_until(lambda: (w := writer_seen_by(survivor)) not in (None, writer_url) and w, 90,
                                "another broker's registry writes")
        assert new_writer != writer_url
        for subject, schema_id in acked.items():
            status, body = call(urls[survivor], "GET", f"/subjects/{subject}/versions/latest")
            assert (status, body["id"]) == (200, schema_id), subject
        status, body = wait_until(lambda: (r := call(urls[survivor], "POST", "/subjects/after-kill-value/versions",
                                                     {"schema": '"double"'}))[0] == 200 and r, 60,
                                  "a registration after the takeover")
        assert body["id"] not in set(acked.values())
        assert call(urls[survivor], "GET", "/subjects/after-kill-value/versions") == (200, [1])

        # schema id validation on the cluster: the topic's two partitions lead on the two live brokers
        survivors = ",".join(cluster.broker(b).bootstrap for b in urls if b != writer)
        admin = AdminClient({"bootstrap.servers": survivors})
        admin.create_topics([NewTopic("after-kill", 2, 2, config={"confluent.value.schema.validation": "true"})]
                            )["after-kill"].result(60)
        good = b"\x00" + body["id"].to_bytes(4, "big") + b"\x01"
        # every leader's registry applies the registration a fetch after the writer: produce until both take it
        wait_until(lambda: _outcomes(survivors, good) == ["delivered"] * 2, 60, "both leaders accept the id")
        assert _outcomes(survivors, b"raw") == ["INVALID_RECORD"] * 2
        # registered, then produced at once: each leader's copy of _schemas may not have read the registration
        # yet, and waits until it has read the topic to its end before it refuses (server/schema_validation.py)
        assert call(urls[survivor], "PUT", "/config/after-kill-value", {"compatibility": "NONE"})[0] == 200
        producer = Producer({"bootstrap.servers": survivors, "retries": 0, "enable.idempotence": False,
                             "linger.ms": 0})
        for i in range(15):
            status, registered = call(urls[survivor], "POST", "/subjects/after-kill-value/versions",
                                      {"schema": json.dumps({"type": "enum", "name": "E", "symbols": [f"R{i}"]})})
            assert status == 200, registered
            assert _outcomes(survivors, b"\x00" + registered["id"].to_bytes(4, "big") + b"\x00", producer) == [
                "delivered"] * 2, i
        # payload validation (eoslog.value.schema.validation.level): the level reaches both leaders the same way
        level = ConfigEntry("eoslog.value.schema.validation.level", "payload", incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource(ConfigResource.Type.TOPIC, "after-kill", incremental_configs=[level])
        admin.incremental_alter_configs([resource])[resource].result(30)
        [described] = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "after-kill")]).values()
        assert described.result(30)["eoslog.value.schema.validation.level"].value == "payload"
        wait_until(lambda: _outcomes(survivors, good) == ["INVALID_RECORD"] * 2, 60,
                   "both leaders refuse a payload that is no double")
        assert _outcomes(survivors, good[:5] + struct.pack("<d", 2.5)) == ["delivered"] * 2
        entry = ConfigEntry("confluent.value.schema.validation", None, incremental_operation=AlterConfigOpType.DELETE)
        resource = ConfigResource(ConfigResource.Type.TOPIC, "after-kill", incremental_configs=[entry])
        admin.incremental_alter_configs([resource])[resource].result(30)
        wait_until(lambda: _outcomes(survivors, b"raw") == ["delivered"] * 2, 60, "both leaders take anything again")


def _outcomes(bootstrap: str, value: bytes, producer: Producer | None = None) -> list:
    """One record of ``value`` to each partition of after-kill: each delivery's error name, or "delivered"."""
    producer = producer or Producer({"bootstrap.servers": bootstrap, "retries": 0, "enable.idempotence": False})
    outcomes: list = [None, None]
    for partition in (0, 1):
        producer.produce("after-kill", value, partition=partition, on_delivery=lambda error, _m, p=partition:
                         outcomes.__setitem__(p, error.name() if error is not None else "delivered"))
    producer.flush(30)
    return outcomes
