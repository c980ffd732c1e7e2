"""The transaction-group wire codec round-trips, and matches the byte layout in docs/spark.md."""

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eoslog.spark import txn_group_protocol as p

names = st.text(min_size=1, max_size=40)
members = st.builds(p.TxnMember, names, st.integers(0, 2**63 - 1), st.integers(0, 32767))


@given(names, st.integers(0, 2**63 - 1), st.none() | names, st.lists(members, max_size=5).map(tuple))
def test_commit_request_round_trip(group, sequence, prefix, ms):
    request = p.CommitRequest(group, sequence, prefix, ms)
    assert p.decode_commit_request(p.encode_commit_request(request)) == request


@given(st.integers(-1, 200), st.booleans(), st.integers(-1, 2**40),
       st.lists(st.tuples(names, st.integers(-1, 120)), max_size=4).map(tuple), st.integers(0, 99))
def test_commit_response_round_trip(code, already, last, member_errors, aborted):
    response = p.CommitResponse(code, already, last, member_errors, aborted)
    assert p.decode_commit_response(p.encode_commit_response(response)) == response


@given(st.lists(names, max_size=4))
def test_describe_round_trip(group_names):
    assert p.decode_describe_request(p.encode_describe_request(group_names)) == group_names
    groups = [p.GroupDescription(n, 0, 7, 1234) for n in group_names]
    assert p.decode_describe_response(p.encode_describe_response(groups)) == groups


def test_abort_round_trip():
    assert p.decode_abort_request(p.encode_abort_request("eoslog-sink-0-q-")) == "eoslog-sink-0-q-"
    response = p.AbortResponse(0, ("a", "b"))
    assert p.decode_abort_response(p.encode_abort_response(response)) == response


def test_commit_request_bytes_as_documented():
    body = p.encode_commit_request(p.CommitRequest("g", 5, None, (p.TxnMember("t", 9, 2),)))
    assert body == (struct.pack(">h", 1) + b"g" + struct.pack(">q", 5) + struct.pack(">h", -1)
                    + struct.pack(">i", 1) + struct.pack(">h", 1) + b"t" + struct.pack(">qh", 9, 2))


def test_api_keys_are_in_the_private_range():
    assert (p.COMMIT_TRANSACTION_GROUP, p.DESCRIBE_TRANSACTION_GROUPS, p.ABORT_TRANSACTIONS_BY_PREFIX) == (
        32256, 32257, 32258)


@pytest.mark.parametrize("data", [b"", b"\x00\x05ab", b"\x00\x01g" + b"\x00" * 3])
def test_truncated_input_is_malformed(data):
    with pytest.raises(p.Malformed):
        p.decode_commit_request(data)


def test_trailing_bytes_are_malformed():
    with pytest.raises(p.Malformed):
        p.decode_abort_request(p.encode_abort_request("abcdefgh") + b"\x00")
