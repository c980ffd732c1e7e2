import pytest
from hypothesis import given
from hypothesis import strategies as st

from eoslog.records import CorruptRecordError
from eoslog.records.varint import (
    decode_unsigned_varint,
    decode_varint,
    decode_varlong,
    encode_unsigned_varint,
    encode_varint,
    encode_varlong,
    size_of_unsigned_varint,
    size_of_varint,
    size_of_varlong,
    write_varint,
    write_varlong,
)

from .strategies import INT32, INT64

# Zigzag + base-128 vectors (the same numbers Kafka's ByteUtils tests use).
VARINT_VECTORS = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (63, "7e"),
    (-64, "7f"),
    (64, "8001"),
    (-65, "8101"),
    (8191, "fe7f"),
    (-8192, "ff7f"),
    (8192, "808001"),
    (2**31 - 1, "feffffff0f"),
    (-(2**31), "ffffffff0f"),
]


@pytest.mark.parametrize("value,encoded", VARINT_VECTORS)
def test_varint_vectors(value, encoded):
    assert encode_varint(value).hex() == encoded
    assert decode_varint(bytes.fromhex(encoded)) == (value, len(encoded) // 2)
    assert encode_varlong(value).hex() == encoded  # same bytes while the value fits in an int32


def test_varlong_extremes():
    assert encode_varlong(2**63 - 1).hex() == "feffffffffffffffff01"
    assert encode_varlong(-(2**63)).hex() == "ffffffffffffffffff01"
    assert decode_varlong(bytes.fromhex("ffffffffffffffffff01")) == (-(2**63), 10)


@given(INT32)
def test_varint_round_trip(value):
    encoded = encode_varint(value)
    assert len(encoded) == size_of_varint(value) <= 5
    assert decode_varint(encoded + b"\xff", 0) == (value, len(encoded))
    out = bytearray(b"x")
    write_varint(out, value)
    assert bytes(out) == b"x" + encoded


@given(INT64)
def test_varlong_round_trip(value):
    encoded = encode_varlong(value)
    assert len(encoded) == size_of_varlong(value) <= 10
    assert decode_varlong(b"\x00" + encoded, 1) == (value, len(encoded) + 1)
    out = bytearray()
    write_varlong(out, value)
    assert bytes(out) == encoded


@given(st.integers(0, 2**32 - 1))
def test_unsigned_varint_round_trip(value):
    encoded = encode_unsigned_varint(value)
    assert len(encoded) == size_of_unsigned_varint(value)
    assert decode_unsigned_varint(encoded) == (value, len(encoded))


@given(INT64, st.data())
def test_truncation_is_corrupt(value, data):
    encoded = encode_varlong(value)
    cut = data.draw(st.integers(0, len(encoded) - 1))
    with pytest.raises(CorruptRecordError, match="truncated"):
        decode_varlong(encoded[:cut])
    # The end bound truncates too, even when more bytes follow in the buffer.
    with pytest.raises(CorruptRecordError, match="truncated"):
        decode_varlong(encoded + b"\x00", 0, cut)


@pytest.mark.parametrize(
    "decoder,encoded",
    [
        (decode_varint, "808080808000"),  # six bytes
        (decode_unsigned_varint, "ffffffffff01"),
        (decode_varlong, "8080808080808080808000"),  # eleven bytes
    ],
)
def test_overlong_is_corrupt(decoder, encoded):
    with pytest.raises(CorruptRecordError, match="longer than"):
        decoder(bytes.fromhex(encoded))


@pytest.mark.parametrize(
    "decoder,encoded",
    [
        (decode_varint, "ffffffff1f"),  # a 33rd bit
        (decode_unsigned_varint, "ffffffff7f"),
        (decode_varlong, "ffffffffffffffffff03"),  # a 65th bit
    ],
)
def test_bits_beyond_width_are_corrupt(decoder, encoded):
    with pytest.raises(CorruptRecordError, match="does not fit"):
        decoder(bytes.fromhex(encoded))


def test_non_minimal_encoding_is_accepted_like_kafka():
    assert decode_varint(bytes.fromhex("8000")) == (0, 2)


@pytest.mark.parametrize(
    "encoder,value",
    [
        (encode_varint, 2**31),
        (encode_varint, -(2**31) - 1),
        (encode_varlong, 2**63),
        (encode_unsigned_varint, -1),
    ],
)
def test_encoding_out_of_range_is_a_value_error(encoder, value):
    with pytest.raises(ValueError):
        encoder(value)
