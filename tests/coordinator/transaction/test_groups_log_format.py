"""The transaction-group record of __transaction_state: bytes, the worked example of docs/transactions.md,
strict decoding, loading beside transactional ids."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eoslog.coordinator.transaction.log_format import TransactionLogFormatError, encode_key, load_state
from eoslog.coordinator.transaction_groups.log_format import (
    GROUP_KEY_VERSION,
    GroupMember,
    GroupRecord,
    GroupState,
    IllegalGroupTransition,
    check_group_transition,
    decode_group_key,
    decode_group_value,
    encode_group_key,
    encode_group_value,
    is_group_key,
    load_groups,
)

names = st.text(min_size=1, max_size=20)
members = st.builds(GroupMember, names, st.integers(0, 2**63 - 1), st.integers(0, 32767))
records = st.builds(GroupRecord, names, st.integers(0, 2**63 - 1), st.sampled_from(GroupState),
                    st.integers(-1, 2**62), st.lists(members, max_size=5).map(tuple))


@given(records)
def test_round_trip(record):
    key = encode_group_key(record.group_name)
    assert is_group_key(key) and decode_group_key(key) == record.group_name
    assert decode_group_value(record.group_name, encode_group_value(record)) == record


def test_worked_example_in_the_docs():
    record = GroupRecord("g", 7, GroupState.PREPARE_COMMIT, 1700000000000, (GroupMember("t-0", 1000, 2),))
    assert encode_group_key("g").hex(" ") == "7e 00 00 01 67"
    assert encode_group_value(record).hex(" ") == (
        "00 00 00 00 00 00 00 00 00 07 00 00 00 01 8b cf e5 68 00 00 00 00 01 "
        "00 03 74 2d 30 00 00 00 00 00 00 03 e8 00 02")


@pytest.mark.parametrize("cut", [1, 5, 12, 22, 25, 30])
def test_truncated_value_is_refused(cut):
    value = encode_group_value(GroupRecord("g", 1, GroupState.COMPLETE_COMMIT, 5, (GroupMember("abc", 1, 1),)))
    with pytest.raises(TransactionLogFormatError):
        decode_group_value("g", value[:cut])


def test_trailing_bytes_unknown_version_and_state_are_refused():
    value = encode_group_value(GroupRecord("g", 1, GroupState.COMPLETE_COMMIT, 5, ()))
    with pytest.raises(TransactionLogFormatError, match="trailing"):
        decode_group_value("g", value + b"\0")
    with pytest.raises(TransactionLogFormatError, match="version"):
        decode_group_value("g", b"\x00\x01" + value[2:])
    with pytest.raises(TransactionLogFormatError, match="state"):
        decode_group_value("g", value[:10] + b"\x05" + value[11:])
    with pytest.raises(TransactionLogFormatError):
        decode_group_key(encode_key("g"))


def test_loaders_take_their_own_records_only():
    first = GroupRecord("g", 1, GroupState.PREPARE_COMMIT, 5, (GroupMember("t", 1, 0),))
    log = [
        (encode_group_key("g"), encode_group_value(first)),
        (encode_group_key("gone"), encode_group_value(GroupRecord("gone", 3, GroupState.COMPLETE_COMMIT, 1, ()))),
        (encode_group_key("g"), encode_group_value(first.completed(9))),
        (encode_group_key("gone"), None),  # tombstone
    ]
    assert load_groups(log) == {"g": first.completed(9)}
    assert load_state(log) == {}  # the transactional-id loader skips key version 0x7E00
    assert GROUP_KEY_VERSION == 0x7E00


def test_group_state_table():
    check_group_transition("g", None, GroupState.PREPARE_COMMIT)
    check_group_transition("g", GroupState.COMPLETE_COMMIT, GroupState.PREPARE_COMMIT)
    check_group_transition("g", GroupState.PREPARE_COMMIT, GroupState.COMPLETE_COMMIT)
    for bad in [(GroupState.PREPARE_COMMIT, GroupState.PREPARE_COMMIT), (None, GroupState.COMPLETE_COMMIT),
                (GroupState.COMPLETE_COMMIT, GroupState.COMPLETE_COMMIT)]:
        with pytest.raises(IllegalGroupTransition):
            check_group_transition("g", *bad)
    assert [s.value for s in GroupState] == [0, 1]  # persisted ids
