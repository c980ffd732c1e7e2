"""Cross-checks against kafka-python 3.0.12's own codec (generated independently from the same specs)
and aiokafka's hand-written v0 ApiVersions parser."""

from __future__ import annotations

import importlib

import pytest
from hypothesis import HealthCheck, given, settings

from eoslog.protocol import codec, messages, schema
from eoslog.protocol.codec import RequestHeader

from .strategies import all_versions, message_strategy

_KP_MODULES = [importlib.import_module(f"kafka.protocol.{m}") for m in ("producer", "consumer", "metadata", "admin", "sasl")]


def kafka_python_class(name: str):
    for module in _KP_MODULES:
        if hasattr(module, name):
            return getattr(module, name)
    raise LookupError(name)


ALL = all_versions("request") + all_versions("response")
# Every 3rd (spec, version) keeps this sweep to a few seconds; the full set runs in test_roundtrip.
SAMPLE = ALL[::3]


@pytest.mark.parametrize("name,api_key,version", SAMPLE, ids=[f"{n}-v{v}" for n, _, v in SAMPLE])
def test_kafka_python_reads_our_frames_and_writes_the_same_bytes(name, api_key, version):
    kp = kafka_python_class(name)
    is_request = name.endswith("Request")

    @settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(obj=message_strategy(name, version))
    def check(obj):
        if name == "ApiVersionsResponse":
            obj.error_code = 0  # kafka-python reads any error reply as v0 (the fallback layout)
        header = RequestHeader(api_key, version, 99, "eoslog")
        if is_request:
            frame = codec.encode_request(header, obj)[4:]
            theirs = kp.decode(frame, version=version, header=True)
            assert theirs.header.client_id == "eoslog"
            assert bytes(theirs.encode(version=version, header=True)) == frame
        else:
            frame = b"".join(bytes(p) for p in codec.encode_response(header, obj))[4:]
            theirs = kp.decode(frame, version=version, header=True)
            assert theirs.header.correlation_id == 99
            header_length = 4 + schema.response_header_version(api_key, version)
            theirs._header = None  # kafka-python cannot re-encode a response header it decoded
            assert bytes(theirs.encode(version=version)) == frame[header_length:]

    check()


def _kp_frame(request, correlation_id=5, client_id="kp-client") -> bytes:
    request.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(request.encode(header=True, framed=True))


@pytest.mark.parametrize("version", [3, 7, 9, 10, 11, 12])
def test_produce_request_from_kafka_python(version):
    from kafka.protocol.producer import ProduceRequest as KP
    records = bytes(range(200)) * 3
    kp_request = KP[version](transactional_id="txn-1", acks=-1, timeout_ms=30000, topic_data=[
        KP.TopicProduceData(name="orders", partition_data=[
            KP.TopicProduceData.PartitionProduceData(index=0, records=records),
            KP.TopicProduceData.PartitionProduceData(index=3, records=None)])])
    frame = _kp_frame(kp_request)
    header, request = codec.decode_request(frame[4:])
    assert header == RequestHeader(0, version, 5, "kp-client")
    assert request.transactional_id == "txn-1" and request.acks == -1 and request.timeout_ms == 30000
    [topic] = request.topic_data
    assert topic.name == "orders"
    assert [(p.index, None if p.records is None else bytes(p.records)) for p in topic.partition_data] == [
        (0, records), (3, None)]
    assert isinstance(topic.partition_data[0].records, memoryview)
    assert codec.encode_request(header, request) == frame


def test_metadata_fetch_and_api_versions_requests_from_kafka_python():
    from kafka.protocol.consumer import FetchRequest as KF
    from kafka.protocol.metadata import ApiVersionsRequest as KA
    from kafka.protocol.metadata import MetadataRequest as KM

    for version in (4, 13):
        frame = _kp_frame(KM[version](topics=[KM.MetadataRequestTopic(name="a"), KM.MetadataRequestTopic(name="b")],
                                      allow_auto_topic_creation=False))
        header, request = codec.decode_request(frame[4:])
        assert [t.name for t in request.topics] == ["a", "b"]
        assert request.allow_auto_topic_creation is False
        assert codec.encode_request(header, request) == frame

    for version in (11, 12, 16):
        topic = KF.FetchTopic(topic="orders", partitions=[KF.FetchTopic.FetchPartition(
            partition=2, fetch_offset=77, partition_max_bytes=1 << 20, current_leader_epoch=-1)])
        frame = _kp_frame(KF[version](replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=50 << 20,
                                      isolation_level=1, topics=[topic]))
        header, request = codec.decode_request(frame[4:])
        assert header.api_version == version and request.isolation_level == 1
        partition = request.topics[0].partitions[0]
        assert (partition.partition, partition.fetch_offset) == (2, 77)
        assert codec.encode_request(header, request) == frame

    for version in (0, 3, 4):
        frame = _kp_frame(KA[version](client_software_name="kafka-python", client_software_version="3.0.12"))
        header, request = codec.decode_request(frame[4:])
        assert header.api_version == version
        if version >= 3:
            assert request.client_software_name == "kafka-python"
        assert codec.encode_request(header, request) == frame


@pytest.mark.parametrize("version", [4, 11, 12, 13, 16])
def test_fetch_response_read_by_kafka_python(version):
    import uuid

    from kafka.protocol.consumer import FetchResponse as KF
    m = messages.FetchResponse
    topic_id = uuid.uuid4()
    response = m(throttle_time_ms=3, error_code=0, session_id=0, responses=[m.FetchableTopicResponse(
        topic="orders", topic_id=topic_id, partitions=[
            m.PartitionData(partition_index=1, error_code=0, high_watermark=10, last_stable_offset=8,
                            log_start_offset=0, aborted_transactions=[m.AbortedTransaction(producer_id=4, first_offset=2)],
                            preferred_read_replica=-1, records=b"x" * 5000),
            m.PartitionData(partition_index=2, error_code=1, high_watermark=-1, records=None)])])
    frame = b"".join(bytes(p) for p in codec.encode_response(RequestHeader(1, version, 42, "c"), response))
    theirs = KF.decode(frame[4:], version=version, header=True)
    assert theirs.header.correlation_id == 42
    parts = theirs.responses[0].partitions
    if version >= 13:
        assert theirs.responses[0].topic_id == topic_id
    else:
        assert theirs.responses[0].topic == "orders"
    assert (parts[0].high_watermark, parts[0].last_stable_offset, bytes(parts[0].records)) == (10, 8, b"x" * 5000)
    assert [(t.producer_id, t.first_offset) for t in parts[0].aborted_transactions] == [(4, 2)]
    assert parts[1].error_code == 1 and parts[1].records is None


def test_api_versions_fallback_read_by_kafka_python_and_aiokafka():
    from aiokafka.protocol.admin import ApiVersionResponse_v0
    from kafka.protocol.metadata import ApiVersionsResponse

    supported = {0: (3, 10), 1: (4, 12), 18: (0, 3)}
    frame = codec.encode_api_versions_fallback(77, supported)
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    # kafka-python asked with v4; it reads an error reply as v0 (header v0 too).
    theirs = ApiVersionsResponse.decode(frame[4:], version=4, header=True)
    assert theirs.header.correlation_id == 77
    assert theirs.error_code == 35
    assert {k.api_key: (k.min_version, k.max_version) for k in theirs.api_keys} == supported
    # aiokafka parses the body after the 4-byte correlation id with its v0 schema.
    body = ApiVersionResponse_v0.decode(frame[8:])
    assert body.error_code == 35
    assert {k: (lo, hi) for k, lo, hi in body.api_versions} == supported
    # and our own v0 decoder agrees
    ours = codec.decode_response(18, 0, frame[4:])
    assert ours.error_code == 35 and [(k.api_key, k.min_version, k.max_version) for k in ours.api_keys] == [
        (0, 3, 10), (1, 4, 12), (18, 0, 3)]
