"""The hand-specialised hot paths agree with the generated codec, for every version they serve:
the same objects from Produce request bytes (and the same failures on bad bytes), the same pieces
from Fetch responses."""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eoslog.log.region import FileRegion
from eoslog.protocol import RecordsList, RequestHeader, codec, messages, specialised, wire

from .strategies import message_strategy

PRODUCE_VERSIONS = sorted(v for kind, key, v in specialised.DECODERS if key == 0)
FETCH_VERSIONS = sorted(v for kind, key, v in specialised.ENCODERS if key == 1)
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
DECODE_FAILURES = (wire.Malformed, struct.error, IndexError, UnicodeDecodeError)


def test_the_served_versions_are_covered():
    assert PRODUCE_VERSIONS == list(range(3, 13))
    assert FETCH_VERSIONS == list(range(4, 19))


def _outcome(decode, body: memoryview):
    try:
        return decode(body, 0, body.nbytes)
    except DECODE_FAILURES as exc:
        return type(exc) if not isinstance(exc, wire.Malformed) else wire.Malformed


def _body(version: int, request) -> bytes:
    frame = codec.encode_request(RequestHeader(0, version, 1, None), request)
    return frame[4 + 10 + (1 if version >= 9 else 0):]  # size, header v1 with null client id, tags


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
def test_produce_decode_matches_generated(version):
    generated = codec.generated_decoder("request", 0, version)
    hand = specialised.DECODERS[("request", 0, version)]
    # Records of 0..300 bytes cross the one/two-byte varint boundary of compact lengths.
    m = messages.ProduceRequest
    partitions = st.lists(st.builds(m.PartitionProduceData, index=st.integers(-(2**31), 2**31 - 1),
                                    records=st.none() | st.binary(max_size=300)), max_size=4)
    topics = st.lists(st.builds(m.TopicProduceData, name=st.text(max_size=140), partition_data=partitions),
                      max_size=3)
    requests = message_strategy("ProduceRequest", version) | st.builds(
        m, transactional_id=st.none() | st.text(max_size=5), acks=st.sampled_from([-1, 0, 1]),
        timeout_ms=st.integers(0, 2**31 - 1), topic_data=topics)

    @SETTINGS
    @given(request=requests, cut=st.integers(0, 400), seed=st.integers(0, 2**32))
    def check(request, cut, seed):
        body = _body(version, request)
        view = memoryview(body)
        a, b = generated(view, 0, len(body)), hand(view, 0, len(body))
        assert a == b and type(a[0].topic_data[0] if a[0].topic_data else None) is \
            type(b[0].topic_data[0] if b[0].topic_data else None)
        assert b[0] == request and b[1] == len(body)
        # Truncated and mutated bodies: both fail alike, or both read the same thing.
        truncated = memoryview(body[:cut])
        assert _outcome(generated, truncated) == _outcome(hand, truncated)
        mutated = bytearray(body)
        rng = random.Random(seed)
        for _ in range(rng.randint(1, 3)):
            if mutated:
                mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        view = memoryview(bytes(mutated))
        assert _outcome(generated, view) == _outcome(hand, view)

    check()


def _flatten(pieces):
    """Pieces as comparable values: buffers as bytes, regions as themselves, in order."""
    return [p if isinstance(p, FileRegion) else bytes(p) for p in pieces]


def _records_values():
    region = st.builds(FileRegion, fd=st.just(7), position=st.integers(0, 1 << 30), length=st.integers(0, 1 << 20))
    buffers = st.binary(max_size=200) | st.binary(min_size=wire.INLINE_RECORDS_MAX, max_size=wire.INLINE_RECORDS_MAX + 10)
    return (st.none() | buffers | buffers.map(memoryview)
            | st.lists(region | buffers, max_size=3).map(RecordsList))


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_fetch_encode_matches_generated(version):
    generated = codec.generated_encoder("response", 1, version)
    hand = specialised.ENCODERS[("response", 1, version)]
    m = messages.FetchResponse
    aborted = st.none() | st.lists(st.builds(m.AbortedTransaction, producer_id=st.integers(-1, 2**62),
                                             first_offset=st.integers(0, 2**62)), max_size=2)
    partitions = st.lists(st.builds(
        m.PartitionData, partition_index=st.integers(0, 1000), error_code=st.integers(-1, 120),
        high_watermark=st.integers(-1, 2**62), last_stable_offset=st.integers(-1, 2**62),
        log_start_offset=st.integers(-1, 2**62), aborted_transactions=aborted,
        preferred_read_replica=st.integers(-1, 5), records=_records_values(),
        current_leader=st.sampled_from([specialised.NO_CURRENT_LEADER, m.LeaderIdAndEpoch()])
        | st.builds(m.LeaderIdAndEpoch, leader_id=st.integers(-1, 5), leader_epoch=st.integers(-1, 2**31 - 1)),
        diverging_epoch=st.sampled_from([specialised.NO_DIVERGING_EPOCH])
        | st.builds(m.EpochEndOffset, epoch=st.integers(-1, 9), end_offset=st.integers(-1, 2**62)),
        snapshot_id=st.sampled_from([specialised.NO_SNAPSHOT_ID])
        | st.builds(m.SnapshotId, end_offset=st.integers(-1, 2**62), epoch=st.integers(-1, 9))), max_size=4)
    endpoints = st.lists(st.builds(m.NodeEndpoint, node_id=st.integers(0, 9), host=st.text(max_size=200),
                                   port=st.integers(0, 65535), rack=st.none() | st.text(max_size=5)), max_size=3)
    responses = st.builds(m, throttle_time_ms=st.integers(0, 1000), error_code=st.integers(0, 5),
                          session_id=st.integers(0, 2**31 - 1), responses=st.lists(st.builds(
                              m.FetchableTopicResponse, topic=st.text(max_size=140), topic_id=st.uuids(),
                              partitions=partitions), max_size=3), node_endpoints=endpoints)

    @SETTINGS
    @given(response=responses | message_strategy("FetchResponse", version))
    def check(response):
        out_a, parts_a = bytearray(b"head"), []
        out_b, parts_b = bytearray(b"head"), []
        generated(response, out_a, parts_a)
        hand(response, out_b, parts_b)
        assert _flatten(parts_a + [out_a]) == _flatten(parts_b + [out_b])

    check()


def test_public_api_uses_the_specialised_paths():
    assert codec._build_decoder("request", 0, 9).decode is specialised.decode_produce_flexible
    assert codec._build_decoder("request", 0, 7).decode is specialised.decode_produce_classic
    assert codec._build_decoder("request", 0, 13).decode is not specialised.decode_produce_flexible
    assert codec._build_encoder("response", 1, 12).encode is specialised.ENCODERS[("response", 1, 12)]
    with pytest.raises(ValueError):
        specialised.fetch_encoder(19)
