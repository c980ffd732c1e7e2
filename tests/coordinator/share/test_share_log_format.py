"""The ``__share_group_state`` records: golden bytes written by hand from Kafka 4.x's ShareSnapshotKey/Value and
ShareUpdateKey/Value specs, round trips of every field, and every kind of damage refused."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eoslog.coordinator.share.log_format import (
    SHARE_SNAPSHOT,
    SHARE_UPDATE,
    SharePartitionKey,
    ShareRecord,
    ShareSnapshotValue,
    ShareStateFormatError,
    ShareUpdateValue,
    StateBatch,
    UnknownRecordTypeError,
    decode_key,
    decode_record,
    decode_value,
    encode_key,
    encode_value,
)
from eoslog.protocol.coordinator_partition import partition_for

TOPIC_ID = uuid.UUID(bytes=bytes(range(1, 17)))
KEY = SharePartitionKey("g1", TOPIC_ID, 3)


def raw(text: str) -> bytes:
    return bytes.fromhex(text.replace("|", " "))


# int16 type | int16 len "g1" | 16-byte uuid | int32 partition
KEY_BYTES = raw("00 00 | 00 02 67 31 | 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f 10 | 00 00 00 03")
SNAPSHOT = ShareSnapshotValue(snapshot_epoch=1, state_epoch=2, leader_epoch=3, start_offset=100,
                              create_timestamp=1000, write_timestamp=2000,
                              state_batches=(StateBatch(100, 109, 2, 1),), delivery_complete_count=10)
SNAPSHOT_BYTES = raw(
    "00 00"                            # value version 0
    "| 00 00 00 01 | 00 00 00 02 | 00 00 00 03"  # SnapshotEpoch, StateEpoch, LeaderEpoch
    "| 00 00 00 00 00 00 00 64"        # StartOffset 100
    "| 00 00 00 00 00 00 03 e8 | 00 00 00 00 00 00 07 d0"  # CreateTimestamp, WriteTimestamp
    "| 02"                             # compact array: 1 batch
    "| 00 00 00 00 00 00 00 64 | 00 00 00 00 00 00 00 6d | 02 | 00 01 | 00"  # 100-109, state 2, count 1, no tags
    "| 01 | 00 | 04 | 00 00 00 0a")    # one tagged field: tag 0, 4 bytes, DeliveryCompleteCount 10
UPDATE = ShareUpdateValue(snapshot_epoch=1, leader_epoch=3, start_offset=-1, state_batches=(StateBatch(110, 119, 0, 2),))
UPDATE_BYTES = raw(
    "00 00 | 00 00 00 01 | 00 00 00 03"  # version, SnapshotEpoch, LeaderEpoch
    "| ff ff ff ff ff ff ff ff"          # StartOffset -1
    "| 02 | 00 00 00 00 00 00 00 6e | 00 00 00 00 00 00 00 77 | 00 | 00 02 | 00"
    "| 00")                              # DeliveryCompleteCount -1 is the default: no tagged field


def test_golden_key_bytes_of_both_record_types():
    assert encode_key(SHARE_SNAPSHOT, KEY) == KEY_BYTES
    assert encode_key(SHARE_UPDATE, KEY) == b"\x00\x01" + KEY_BYTES[2:]
    assert decode_key(KEY_BYTES) == (SHARE_SNAPSHOT, KEY)
    assert decode_key(b"\x00\x01" + KEY_BYTES[2:]) == (SHARE_UPDATE, KEY)


def test_golden_snapshot_value_bytes():
    assert encode_value(SNAPSHOT) == SNAPSHOT_BYTES
    assert decode_value(SHARE_SNAPSHOT, SNAPSHOT_BYTES) == SNAPSHOT


def test_golden_update_value_bytes():
    assert encode_value(UPDATE) == UPDATE_BYTES
    assert decode_value(SHARE_UPDATE, UPDATE_BYTES) == UPDATE


def test_a_delivery_complete_count_of_minus_one_is_not_written_and_any_other_is():
    unknown = ShareSnapshotValue(0, 0, 0, -1, 0, 0)
    assert encode_value(unknown).endswith(raw("01 00"))  # empty array, empty tagged fields
    zero = ShareSnapshotValue(0, 0, 0, -1, 0, 0, delivery_complete_count=0)
    assert encode_value(zero).endswith(raw("01 | 01 00 04 00 00 00 00"))


def test_the_coordinator_key_is_kafkas():
    # SharePartitionKey.asCoordinatorKey: group:topicId:partition, the id in Kafka's base64 form
    assert KEY.coordinator_key() == "g1:AQIDBAUGBwgJCgsMDQ4PEA:3"


def test_docs_worked_example_matches_the_code():
    """The byte lines of docs/share-groups.md's worked example (a label, then hex and bars; the lines of
    words under them are notes) are the golden bytes above."""
    text = (Path(__file__).resolve().parents[3] / "docs" / "share-groups.md").read_text()
    example = text[text.index("## The `__share_group_state` records"):text.index("**Loading and damage.**")]
    runs: list[bytes] = []
    blocks = example.split("```")[1::2]
    for line in "\n".join(blocks).splitlines():
        tokens = line.replace("|", " ").split()
        if tokens and tokens[0] in ("key", "snapshot", "update"):
            runs.append(b"")
            tokens = tokens[1:]
        if runs and tokens and all(len(t) == 2 and all(c in "0123456789abcdef" for c in t) for t in tokens):
            runs[-1] += bytes.fromhex("".join(tokens))
    assert runs == [KEY_BYTES, SNAPSHOT_BYTES, UPDATE_BYTES]
    assert partition_for(KEY.coordinator_key(), 50) == 36 and "(partition 36 of 50)" in text


def test_unknown_tags_are_skipped():
    # UPDATE with a tagged section holding tag 7 (2 bytes) and tag 0 (the count 5)
    data = UPDATE_BYTES[:-1] + raw("02 | 00 04 00 00 00 05 | 07 02 ab cd")
    assert decode_value(SHARE_UPDATE, data).delivery_complete_count == 5
    # and a batch's own tagged section may hold fields too
    with_batch_tag = UPDATE_BYTES[:-2] + raw("01 09 00") + UPDATE_BYTES[-1:]
    assert decode_value(SHARE_UPDATE, with_batch_tag).state_batches == UPDATE.state_batches


def test_a_tombstone_decodes_to_a_record_without_value():
    record = decode_record(KEY_BYTES, None)
    assert record == ShareRecord.tombstone(KEY) and record.value is None
    assert ShareRecord.tombstone(KEY).encode() == (KEY_BYTES, None)


# ---- damage ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("what, data", [
    ("empty", b""),
    ("truncated in the head", SNAPSHOT_BYTES[:20]),
    ("truncated in a batch", SNAPSHOT_BYTES[:50]),
    ("truncated in the tagged fields", SNAPSHOT_BYTES[:-2]),
    ("trailing bytes", SNAPSHOT_BYTES + b"\x00"),
    ("unknown version", b"\x00\x01" + SNAPSHOT_BYTES[2:]),
    ("null array", SNAPSHOT_BYTES[:38] + b"\x00" + b"\x00"),
    ("more batches than bytes", SNAPSHOT_BYTES[:38] + raw("ff ff ff 0f")),
    ("count of the wrong size", SNAPSHOT_BYTES[:-7] + raw("01 00 02 00 0a")),
    ("count twice", SNAPSHOT_BYTES[:-7] + raw("02 00 04 00 00 00 0a 00 04 00 00 00 0b")),
    ("varint too long", SNAPSHOT_BYTES[:38] + raw("80 80 80 80 80 01")),
])
def test_a_damaged_snapshot_value_is_refused(what, data):
    with pytest.raises(ShareStateFormatError):
        decode_value(SHARE_SNAPSHOT, data)


@pytest.mark.parametrize("what, data", [
    ("truncated", UPDATE_BYTES[:-1]),
    ("trailing", UPDATE_BYTES + b"\x00"),
    ("unknown version", b"\x00\x02" + UPDATE_BYTES[2:]),
])
def test_a_damaged_update_value_is_refused(what, data):
    with pytest.raises(ShareStateFormatError):
        decode_value(SHARE_UPDATE, data)


@pytest.mark.parametrize("what, data", [
    ("shorter than its type", b"\x00"),
    ("truncated partition", KEY_BYTES[:-1]),
    ("trailing bytes", KEY_BYTES + b"\x00"),
    ("null group", raw("00 00 ff ff") + KEY_BYTES[6:]),
    ("group not UTF-8", raw("00 00 00 02 ff fe") + KEY_BYTES[6:]),
])
def test_a_damaged_key_is_refused(what, data):
    with pytest.raises(ShareStateFormatError):
        decode_key(data)


def test_a_key_of_an_unknown_record_type_says_so():
    with pytest.raises(UnknownRecordTypeError):
        decode_key(b"\x00\x07" + KEY_BYTES[2:])
    with pytest.raises(ValueError):
        encode_key(2, KEY)


# ---- round trips ------------------------------------------------------------------------------------------

int16s = st.integers(-(2**15), 2**15 - 1)
int32s = st.integers(-(2**31), 2**31 - 1)
int64s = st.integers(-(2**63), 2**63 - 1)
batches = st.lists(st.builds(StateBatch, int64s, int64s, st.integers(-128, 127), int16s), max_size=6).map(tuple)
keys = st.builds(SharePartitionKey, st.text(max_size=40), st.uuids(), int32s)


@given(keys, st.sampled_from([SHARE_SNAPSHOT, SHARE_UPDATE]))
def test_keys_round_trip(key, record_type):
    assert decode_key(encode_key(record_type, key)) == (record_type, key)


@given(st.builds(ShareSnapshotValue, int32s, int32s, int32s, int64s, int64s, int64s, batches, int32s))
def test_snapshot_values_round_trip(value):
    assert decode_value(SHARE_SNAPSHOT, encode_value(value)) == value


@given(st.builds(ShareUpdateValue, int32s, int32s, int64s, batches, int32s))
def test_update_values_round_trip(value):
    assert decode_value(SHARE_UPDATE, encode_value(value)) == value


@given(keys, st.builds(ShareUpdateValue, int32s, int32s, int64s, batches, int32s))
def test_records_round_trip(key, value):
    record = ShareRecord(SHARE_UPDATE, key, value)
    assert decode_record(*record.encode()) == record
