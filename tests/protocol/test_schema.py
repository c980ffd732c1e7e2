"""Parsing Kafka's JSON specs: version ranges, names, defaults, structs, header versions."""

from __future__ import annotations

import pytest

from eoslog.protocol import schema
from eoslog.protocol.schema import VersionRange


@pytest.mark.parametrize("text,low,high,inside,outside", [
    ("3+", 3, 0x7FFF, [3, 4, 100], [0, 2]),
    ("0-12", 0, 12, [0, 12], [13, -1]),
    ("5", 5, 5, [5], [4, 6]),
    ("none", 0, -1, [], [0, 1]),
    (None, 0, -1, [], [0]),
])
def test_version_range(text, low, high, inside, outside):
    r = VersionRange.parse(text)
    assert (r.low, r.high) == (low, high)
    assert all(v in r for v in inside) and not any(v in r for v in outside)


@pytest.mark.parametrize("name,snake", [
    ("TopicData", "topic_data"), ("ProducerId", "producer_id"), ("ThrottleTimeMs", "throttle_time_ms"),
    ("timeoutMs", "timeout_ms"), ("validateOnly", "validate_only"), ("Isr", "isr"),
    ("SASLHandshake", "sasl_handshake"), ("V2Field", "v2_field"),
])
def test_snake_case(name, snake):
    assert schema.snake_case(name) == snake


def test_every_spec_loads_and_every_api_has_both_directions():
    names = schema.spec_names()
    assert len(names) >= 100
    keys = schema.api_keys()
    assert keys[0] == "Produce" and keys[1] == "Fetch" and keys[18] == "ApiVersions" and keys[22] == "InitProducerId"
    for key in keys:
        assert schema.request_spec(key).kind == "request"
        assert schema.response_spec(key).kind == "response"


def test_produce_request_spec_details():
    spec = schema.load_spec("ProduceRequest")
    assert (spec.api_key, spec.kind, str(spec.valid_versions), str(spec.flexible_versions)) == (0, "request", "0-13", "9+")  # v0-v2: Kafka 3.9's
    transactional_id, _acks, _timeout, topic_data = spec.fields
    assert transactional_id.attr == "transactional_id" and transactional_id.default is None
    assert 3 in transactional_id.nullable_versions
    assert topic_data.is_array and topic_data.is_struct and topic_data.struct_name == "TopicProduceData"
    name, topic_id, partition_data = topic_data.fields
    assert name.versions == VersionRange(0, 12) and topic_id.type == "uuid" and name.map_key
    assert partition_data.fields[1].type == "records"
    assert set(spec.structs) == {"TopicProduceData", "PartitionProduceData"}


def test_tagged_fields_and_defaults():
    spec = schema.load_spec("FetchResponse")
    partition = spec.structs["PartitionData"]
    by_name = {f.name: f for f in partition}
    assert by_name["DivergingEpoch"].tag == 0 and by_name["DivergingEpoch"].tagged_in(12)
    assert not by_name["DivergingEpoch"].tagged_in(11)
    assert by_name["LastStableOffset"].default == -1 and by_name["Records"].default is None
    assert by_name["AbortedTransactions"].default == ()  # a fresh empty list
    assert by_name["PreferredReadReplica"].ignorable is False


def test_common_structs_are_resolved():
    spec = schema.load_spec("AddPartitionsToTxnRequest")
    assert "AddPartitionsToTxnTopic" in spec.structs
    topic = spec.structs["AddPartitionsToTxnTopic"]
    assert [f.name for f in topic] == ["Name", "Partitions"]


def test_defaults_in_every_notation():
    assert schema._parse_default("0x7fffffff", "int32") == 0x7FFFFFFF
    assert schema._parse_default(-1, "int64") == -1
    assert schema._parse_default(False, "bool") is False
    assert schema._parse_default("true", "bool") is True
    assert schema._parse_default("null", "string") is None
    assert schema._parse_default(None, "string") == ""
    assert schema._parse_default(None, "uuid") == schema.ZERO_UUID
    assert schema._parse_default("null", "[]int32") is None


def test_header_versions_and_the_api_versions_exception():
    assert schema.request_header_version(0, 8) == 1 and schema.request_header_version(0, 9) == 2
    assert schema.response_header_version(0, 8) == 0 and schema.response_header_version(0, 9) == 1
    assert schema.request_header_version(18, 3) == 2
    assert all(schema.response_header_version(18, v) == 0 for v in range(10))
    header = schema.load_spec("RequestHeader")
    client_id = header.fields[-1]
    assert client_id.flexible_versions == VersionRange.parse("none")  # never a compact string


def test_spec_lookup_by_api_key_agrees_with_a_full_parse():
    """_specs_by_key reads only the top-level type and apiKey of each file; a full parse must say the same."""
    parsed = {}
    for name in schema.spec_names() + schema.added_spec_names() + schema.extension_spec_names():
        spec = schema.load_spec(name)
        if spec.api_key is not None:
            parsed[(spec.kind, spec.api_key)] = name
    assert schema._specs_by_key() == parsed


def test_added_kafka_specs_use_kafka_api_keys_and_do_not_shadow_kafka_pythons():
    """Our specs of newer Kafka APIs take keys below eoslog's private range and never a name kafka-python has."""
    for name in schema.added_spec_names():
        assert name not in schema.spec_names()
        spec = schema.load_spec(name)
        assert spec.api_key is None or spec.api_key < 0x7E00


# Share groups (KIP-932) as Kafka 4.2 serves them: (api key, validVersions, flexibleVersions) of both
# directions. Versions 0 of keys 76-79 were Kafka 4.0's early access and are gone; 4.2 added ShareFetch
# and ShareAcknowledge v2 (KIP-1206, KIP-1222) and the v1s of keys 85, 87 and 90 (KIP-1226).
SHARE_APIS = {
    "ShareGroupHeartbeat": (76, "1", "0+"),
    "ShareGroupDescribe": (77, "1", "1+"),
    "ShareFetch": (78, "1-2", "0+"),
    "ShareAcknowledge": (79, "1-2", "0+"),
    "InitializeShareGroupState": (83, "0", "0+"),
    "ReadShareGroupState": (84, "0", "0+"),
    "WriteShareGroupState": (85, "0-1", "0+"),
    "DeleteShareGroupState": (86, "0", "0+"),
    "ReadShareGroupStateSummary": (87, "0-1", "0+"),
    "DescribeShareGroupOffsets": (90, "0-1", "0+"),
    "AlterShareGroupOffsets": (91, "0", "0+"),
    "DeleteShareGroupOffsets": (92, "0", "0+"),
}


@pytest.mark.parametrize("api", sorted(SHARE_APIS))
def test_share_group_specs_have_kafka_4_2_versions(api):
    api_key, valid, flexible = SHARE_APIS[api]
    assert schema.api_keys()[api_key] == api
    for spec in (schema.request_spec(api_key), schema.response_spec(api_key)):
        assert spec.name in schema.added_spec_names()
        assert (str(spec.valid_versions), str(spec.flexible_versions)) == (
            valid if "-" in valid else f"{valid}-{valid}", flexible)
        assert all(spec.is_flexible(v) for v in range(spec.valid_versions.low, spec.valid_versions.high + 1))


def test_records_default_to_empty_where_no_valid_version_allows_null():
    """Kafka's generated classes leave a records field null; ShareFetchResponse's Records may be null only in
    the removed v0, so an unset field there is an empty record set (FetchResponse's stays null)."""
    share = {f.name: f for f in schema.load_spec("ShareFetchResponse").structs["PartitionData"]}
    assert share["Records"].nullable_versions == VersionRange(0, 0) and share["Records"].default == b""
    fetch = {f.name: f for f in schema.load_spec("FetchResponse").structs["PartitionData"]}
    assert fetch["Records"].default is None
    assert VersionRange(0, 0).overlaps(VersionRange(0, 2)) and not VersionRange(0, 0).overlaps(VersionRange(1, 2))
    assert not schema.NO_VERSIONS.overlaps(VersionRange(0, 5))


def test_share_specs_keep_kafkas_map_keys_and_fields_of_removed_versions():
    request = schema.load_spec("ShareFetchRequest")
    topic = {f.name: f for f in request.structs["FetchTopic"]}
    partition = {f.name: f for f in request.structs["FetchPartition"]}
    assert topic["TopicId"].map_key and partition["PartitionIndex"].map_key
    # PartitionMaxBytes lived in v0 only: kept in the spec, absent from every version served.
    assert partition["PartitionMaxBytes"].versions == VersionRange(0, 0)
    assert [f.element_type for f in request.structs["AcknowledgementBatch"]] == ["int64", "int64", "int8"]
    ack = {f.name: f for f in schema.load_spec("ShareAcknowledgeResponse").fields}
    assert ack["AcquisitionLockTimeoutMs"].ignorable and ack["AcquisitionLockTimeoutMs"].versions == VersionRange.parse("2+")
