"""Every request and response spec, every valid version: encode -> decode gives the object back, and
re-encoding the decoded object gives the same bytes."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eoslog.protocol import codec, messages, schema
from eoslog.protocol.codec import RequestHeader

from .strategies import all_versions, message_strategy

# kafka-python's copy of Kafka's specs, then the newer ones we wrote (protocol/kafka_specs: KIP-848, KIP-932).
REQUESTS = all_versions("request") + all_versions("request", schema.added_spec_names())
RESPONSES = all_versions("response") + all_versions("response", schema.added_spec_names())
FAST = settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_every_request_has_a_response_and_the_sweep_is_broad():
    assert len(REQUESTS) > 200
    assert {key for _, key, _ in REQUESTS} == {key for _, key, _ in RESPONSES}


def _request_round_trip(name: str, api_key: int, version: int, request, client_id) -> None:
    header = RequestHeader(api_key, version, 12345, client_id)
    frame = codec.encode_request(header, request)
    assert int.from_bytes(frame[:4], "big", signed=True) == len(frame) - 4
    decoded_header, decoded = codec.decode_request(frame[4:])
    assert decoded_header == header
    assert decoded == request
    assert codec.encode_request(header, decoded) == frame


def _response_round_trip(name: str, api_key: int, version: int, response) -> None:
    header = RequestHeader(api_key, version, -7, "c")
    frame = b"".join(bytes(p) for p in codec.encode_response(header, response))
    assert int.from_bytes(frame[:4], "big", signed=True) == len(frame) - 4
    correlation_id, decoded = codec.decode_response_frame(api_key, version, frame[4:])
    assert correlation_id == -7
    assert decoded == response
    assert b"".join(bytes(p) for p in codec.encode_response(header, decoded)) == frame


@pytest.mark.parametrize("name,api_key,version", REQUESTS, ids=[f"{n}-v{v}" for n, _, v in REQUESTS])
def test_default_request_round_trip(name, api_key, version):
    _request_round_trip(name, api_key, version, messages.message_class(name)(), "client-1")


@pytest.mark.parametrize("name,api_key,version", RESPONSES, ids=[f"{n}-v{v}" for n, _, v in RESPONSES])
def test_default_response_round_trip(name, api_key, version):
    _response_round_trip(name, api_key, version, messages.message_class(name)())


@pytest.mark.parametrize("name,api_key,version", REQUESTS, ids=[f"{n}-v{v}" for n, _, v in REQUESTS])
def test_generated_request_round_trip(name, api_key, version):
    @FAST
    @given(request=message_strategy(name, version), client_id=st.none() | st.text(max_size=8))
    def check(request, client_id):
        _request_round_trip(name, api_key, version, request, client_id)

    check()


@pytest.mark.parametrize("name,api_key,version", RESPONSES, ids=[f"{n}-v{v}" for n, _, v in RESPONSES])
def test_generated_response_round_trip(name, api_key, version):
    @FAST
    @given(response=message_strategy(name, version))
    def check(response):
        _response_round_trip(name, api_key, version, response)

    check()


DATA = [(name, v) for name in ("ConsumerProtocolSubscription", "ConsumerProtocolAssignment")
        for v in range(messages.message_class(name).VALID_VERSIONS.low, messages.message_class(name).VALID_VERSIONS.high + 1)]


@pytest.mark.parametrize("name,version", DATA)
def test_data_specs_round_trip(name, version):
    @FAST
    @given(obj=message_strategy(name, version))
    def check(obj):
        data = codec.encode_data(obj, version)
        assert codec.decode_data(name, version, data) == obj

    check()
