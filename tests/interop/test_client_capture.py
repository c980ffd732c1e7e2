"""What confluent-kafka, kafka-python and aiokafka send today, recorded at the broker while each runs
the everyday flows (capture_flows.py: admin create/describe, idempotent produce, a transaction with
group offsets, a read_committed group consume and commit, offset lookups), and that every flow works at
the versions they now pick. The versions are the table of docs/clients.md: a client upgrade that
changes them fails here, so the table is updated with it."""

from __future__ import annotations

import pytest

from eoslog.testing.embedded import EmbeddedBroker
from eoslog.testing.request_recorder import RequestRecorder

from . import capture_flows

pytestmark = pytest.mark.interop

# Highest version each client sent per API key against this broker (docs/clients.md).
EXPECTED = {
    "confluent": {0: 10, 1: 16, 2: 7, 3: 13, 8: 9, 9: 9, 10: 2, 11: 5, 12: 3, 13: 1, 14: 3, 18: 3, 19: 4,
                  22: 4, 24: 0, 25: 0, 26: 1, 28: 3},
    "kafka-python": {0: 9, 1: 12, 2: 10, 3: 13, 8: 8, 9: 8, 10: 4, 11: 7, 13: 5, 14: 5, 18: 4, 19: 7,
                     22: 4, 24: 3, 25: 3, 26: 3, 28: 3},
    "aiokafka": {0: 7, 1: 11, 2: 3, 3: 5, 8: 3, 9: 3, 10: 1, 11: 5, 13: 1, 14: 3, 18: 0, 19: 3,
                 22: 0, 24: 0, 25: 0, 26: 0, 28: 0},
}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    broker = EmbeddedBroker(data_dir=tmp_path_factory.mktemp("capture"))
    with RequestRecorder() as recorder:
        bootstrap = broker.start()
        try:
            results = {name: flow(bootstrap) for name, flow in capture_flows.CLIENTS.items()}
        finally:
            broker.stop()
    return recorder, results


@pytest.mark.parametrize("client", list(capture_flows.CLIENTS))
def test_each_client_runs_every_flow(recorded, client):
    _, results = recorded
    result = results[client]
    assert result["consumed"] == sorted(capture_flows._values(client))
    offsets = result["offsets"]
    # 12 records over 3 partitions (4 each); partition 0 also holds the transaction's record and marker.
    assert offsets["earliest"] == {0: 0, 1: 0, 2: 0}
    assert offsets["latest"] == {0: 6, 1: 4, 2: 4}
    assert offsets["for_time"] == {0: 2, 1: 1, 2: 1}  # BASE_TS + 4 is record 4 (partition 1, offset 1) ...
    if "max_timestamp" in offsets:
        # ... and the newest timestamp of each partition: the commit marker's (written now) on partition 0.
        assert offsets["max_timestamp"] == {0: 5, 1: 3, 2: 3}
    assert result["described_partitions"] == capture_flows.PARTITIONS


@pytest.mark.parametrize("client", list(capture_flows.CLIENTS))
def test_versions_each_client_sends(recorded, client):
    recorder, _ = recorded
    sent = {key: max(versions) for key, versions in recorder.versions(f"cap-{client}").items()}
    # Heartbeat (12) depends on timing (a short flow may end before the first one).
    sent.pop(12, None)
    expected = dict(EXPECTED[client])
    expected.pop(12, None)
    assert sent == expected
    assert 71 not in sent and 72 not in sent  # telemetry: not advertised, so not sent (librdkafka asks otherwise)


def test_fields_the_newer_versions_carry(recorded):
    recorder, _ = recorded
    confluent = recorder.fields("cap-confluent")
    assert "topics.topic_id" in confluent[(1, 16)] and "topics.topic" not in confluent[(1, 16)]  # Fetch by id
    assert "topics.partitions.current_leader_epoch" in confluent[(1, 16)]
    fetch = recorder.first(1, "cap-confluent")
    assert fetch.frame[:4] == b"\x00\x01\x00\x10"  # api key 1, version 16: the bytes as librdkafka sent them
    list_offsets = [r.request for r in recorder.requests if r.api_key == 2 and (r.client_id or "").startswith("cap-conf")]
    assert any(p.timestamp == -3 for r in list_offsets for t in r.topics for p in t.partitions)  # max timestamp
    kafka_python = recorder.fields("cap-kafka-python")
    assert "include_topic_authorized_operations" in kafka_python[(3, 13)]
