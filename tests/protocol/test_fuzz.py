"""Garbage in: decode_request raises InvalidRequest, UnsupportedVersion or UnknownApiKey -- never anything
else -- for random bytes and for valid frames with bytes flipped, cut, inserted or lengths inflated."""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eoslog.protocol import InvalidRequest, RequestHeader, UnknownApiKey, UnsupportedVersion, codec, messages

from .strategies import all_versions, message_strategy

ALLOWED = (InvalidRequest, UnsupportedVersion, UnknownApiKey)
REQUESTS = all_versions("request")


def _decode(frame) -> None:
    try:
        codec.decode_request(frame)
    except ALLOWED:
        pass


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=64))
def test_random_bytes(frame):
    _decode(frame)


@settings(max_examples=300, deadline=None)
@given(api_key=st.integers(-2, 80), version=st.integers(-1, 20), tail=st.binary(max_size=48))
def test_random_bodies_behind_a_plausible_header(api_key, version, tail):
    _decode(struct.pack(">hhih", api_key, version, 1, 3) + b"abc" + tail)


def _mutations(frame: bytes, rng: random.Random):
    yield frame[: rng.randrange(len(frame) + 1)]  # cut
    for _ in range(6):
        mutated = bytearray(frame)
        for _ in range(rng.randint(1, 4)):
            choice = rng.random()
            position = rng.randrange(10, len(mutated)) if len(mutated) > 10 else 0
            if choice < 0.5:
                mutated[position] = rng.randrange(256)
            elif choice < 0.7:
                mutated[position:position] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4)))
            elif choice < 0.85:
                del mutated[position:position + rng.randint(1, 4)]
            else:  # a length or count made huge or negative
                mutated[position:position + 4] = rng.choice([b"\x7f\xff\xff\xff", b"\xff\xff\xff\xfe", b"\xff\xff\xff\xff\x0f"])
        yield bytes(mutated)


@pytest.mark.parametrize("name,api_key,version", REQUESTS, ids=[f"{n}-v{v}" for n, _, v in REQUESTS])
def test_mutated_valid_requests(name, api_key, version):
    @settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(request=message_strategy(name, version), seed=st.integers(0, 2**32))
    def check(request, seed):
        frame = codec.encode_request(RequestHeader(api_key, version, 1, "fuzz"), request)[4:]
        for mutated in _mutations(frame, random.Random(seed)):
            _decode(mutated)
            _decode(memoryview(mutated))

    check()


def test_every_prefix_of_a_produce_request_fails_cleanly():
    m = messages.ProduceRequest
    request = m(transactional_id="t", acks=-1, timeout_ms=1, topic_data=[m.TopicProduceData(
        name="topic", partition_data=[m.PartitionProduceData(index=i, records=b"r" * 200) for i in range(3)])])
    for version in (3, 7, 9, 11):
        frame = codec.encode_request(RequestHeader(0, version, 1, "c"), request)[4:]
        for cut in range(len(frame)):
            with pytest.raises(InvalidRequest):
                codec.decode_request(frame[:cut])
