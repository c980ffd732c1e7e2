"""__consumer_offsets records: byte layouts, round trips, partition_for, and load()."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eoslog.coordinator.group import GroupCoordinator
from eoslog.coordinator.group.errors import CorruptGroupRecordError, Errors
from eoslog.coordinator.group.log_format import (
    GroupMetadataKey,
    GroupMetadataValue,
    LogEntry,
    Marker,
    MemberRecord,
    OffsetCommitKey,
    OffsetCommitValue,
    UnknownKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_value,
    encode_key,
    encode_offset_commit_value,
    java_string_hash,
    load,
    partition_for,
)
from eoslog.coordinator.group.state import GroupState

text = st.text(max_size=20)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)


def test_java_hash_code():
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("") == 0
    assert java_string_hash("polygenelubricants") == -2**31  # Integer.MIN_VALUE
    assert java_string_hash("\U0001F600") == 0xD83D * 31 + 0xDE00  # a surrogate pair: two UTF-16 units
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("polygenelubricants", 50) == 0  # Kafka's Utils.abs(MIN_VALUE) is 0
    assert partition_for("console-consumer-12345", 50) == abs(java_string_hash("console-consumer-12345")) % 50


def test_offset_commit_bytes():
    key = encode_key(OffsetCommitKey("g", "t", 3))
    assert key == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x03"
    value = encode_offset_commit_value(OffsetCommitValue(5, 2, "m", 1000))
    assert value == (b"\x00\x03" + (5).to_bytes(8, "big") + (2).to_bytes(4, "big") + b"\x00\x01m"
                     + (1000).to_bytes(8, "big"))
    with_expiry = encode_offset_commit_value(OffsetCommitValue(5, -1, "", 1000, 2000))
    assert with_expiry[:2] == b"\x00\x01" and len(with_expiry) == 2 + 8 + 2 + 8 + 8


def test_group_metadata_bytes():
    assert encode_key(GroupMetadataKey("g")) == b"\x00\x02\x00\x01g"
    value = GroupMetadataValue("consumer", 4, None, None, 7, (
        MemberRecord("m", None, "c", "h", 300, 100, b"S", b"A"),))
    raw = encode_group_metadata_value(value)
    assert raw == (b"\x00\x03" + b"\x00\x08consumer" + b"\x00\x00\x00\x04" + b"\xff\xff" + b"\xff\xff"
                   + (7).to_bytes(8, "big") + b"\x00\x00\x00\x01"
                   + b"\x00\x01m" + b"\xff\xff" + b"\x00\x01c" + b"\x00\x01h"
                   + (300).to_bytes(4, "big") + (100).to_bytes(4, "big")
                   + b"\x00\x00\x00\x01S" + b"\x00\x00\x00\x01A")


@given(text, text, int32)
def test_offset_key_round_trip(group, topic, partition):
    assert decode_key(encode_key(OffsetCommitKey(group, topic, partition))) == \
        OffsetCommitKey(group, topic, partition)


@given(text)
def test_group_key_round_trip(group):
    assert decode_key(encode_key(GroupMetadataKey(group))) == GroupMetadataKey(group)


@given(int64, int32, text, int64, st.one_of(st.just(-1), int64))
def test_offset_value_round_trip(offset, epoch, metadata, ts, expire):
    value = OffsetCommitValue(offset, epoch if expire == -1 else -1, metadata, ts, expire)
    assert decode_offset_commit_value(encode_offset_commit_value(value)) == value


member = st.builds(MemberRecord, text, st.none() | text, text, text, int32, int32, st.binary(max_size=30),
                   st.binary(max_size=30))
group_value = st.builds(GroupMetadataValue, text, int32, st.none() | text, st.none() | text, int64,
                        st.lists(member, max_size=4).map(tuple))


@given(group_value)
def test_group_value_round_trip(value):
    assert decode_group_metadata_value(encode_group_metadata_value(value)) == value


@given(group_value, st.sampled_from([0, 1, 2]))
def test_group_value_old_versions(value, version):
    decoded = decode_group_metadata_value(encode_group_metadata_value(value, version))
    assert decoded.generation == value.generation and len(decoded.members) == len(value.members)
    for d, m in zip(decoded.members, value.members):
        assert d.group_instance_id is None
        assert d.rebalance_timeout == (m.session_timeout if version == 0 else m.rebalance_timeout)


@given(st.binary(max_size=40))
def test_garbage_raises_only_corrupt_record_error(data):
    for decode in (decode_key, decode_offset_commit_value, decode_group_metadata_value):
        try:
            decode(data)
        except CorruptGroupRecordError:
            pass


def test_unknown_key_versions_and_trailing_bytes():
    assert decode_key(b"\x00\x05whatever") == UnknownKey(5)
    with pytest.raises(CorruptGroupRecordError):
        decode_key(encode_key(GroupMetadataKey("g")) + b"x")
    with pytest.raises(CorruptGroupRecordError):
        decode_offset_commit_value(b"\x00\x09")


def _entry(offset, key, value, pid=-1, txn=False, marker=None):
    return LogEntry(offset, key and encode_key(key), value if value is None or isinstance(value, bytes)
                    else (encode_offset_commit_value(value) if isinstance(value, OffsetCommitValue)
                          else encode_group_metadata_value(value)), pid, txn, marker)


def test_load_latest_wins_tombstones_and_markers():
    k0, k1, k2 = (OffsetCommitKey("g", "t", p) for p in range(3))
    gv = GroupMetadataValue("consumer", 1, "range", "m", 0, (MemberRecord("m", None, "c", "h", 1, 1, b"", b""),))
    entries = [
        _entry(0, k0, OffsetCommitValue(1, -1, "", 0)),
        _entry(1, k0, OffsetCommitValue(2, -1, "", 0)),
        _entry(2, k1, OffsetCommitValue(3, -1, "", 0)),
        _entry(3, k1, None),  # tombstone
        _entry(4, k2, OffsetCommitValue(10, -1, "", 0), pid=7, txn=True),
        _entry(5, k0, OffsetCommitValue(20, -1, "", 0), pid=8, txn=True),
        _entry(6, None, None, pid=7, txn=True, marker=Marker.ABORT),
        _entry(7, GroupMetadataKey("g"), gv),
        _entry(8, GroupMetadataKey("dead"), gv),
        _entry(9, GroupMetadataKey("dead"), None),
        _entry(10, k2, OffsetCommitValue(11, -1, "", 0), pid=9, txn=True),
        _entry(11, None, None, pid=9, txn=True, marker=Marker.COMMIT),
    ]
    loaded = load(entries)
    assert {tp: lo.value.offset for tp, lo in loaded.offsets["g"].items()} == {("t", 0): 2, ("t", 2): 11}
    assert list(loaded.pending_txn_offsets) == [8]  # no marker yet
    assert loaded.groups == {"g": gv}
    assert loaded.deleted_groups == {"dead"}


def test_coordinator_reload_rebuilds_groups_and_offsets(h):
    a, b = h.stable_group(2)
    h.run(h.c.commit_offsets("g", [("t", 0, 10), ("t", 1, 11)], member_id=a, generation_id=1, now_ms=h.now))
    h.run(h.c.commit_offsets("simple", [("x", 0, 1)], now_ms=h.now))
    h.run(h.c.commit_offsets("deleted", [("x", 0, 1)], now_ms=h.now))
    h.run(h.c.delete_groups(["deleted"], now_ms=h.now))
    h.run(h.c.txn_commit_offsets("g", 5, 0, [("t", 0, 99)], now_ms=h.now))
    h.run(h.c.txn_commit_offsets("simple", 6, 0, [("x", 0, 50)], now_ms=h.now))
    h.marker(6, commit=True)

    fresh = GroupCoordinator(h.config)
    for partition, entries in h.log.items():
        assert fresh.fetch_offsets("g").response.error in (Errors.NONE, Errors.COORDINATOR_LOAD_IN_PROGRESS)
        fresh.load_partition(partition, iter(entries), now_ms=h.now)
    g = fresh.groups["g"]
    assert g.state is GroupState.STABLE and g.generation_id == 1 and g.leader_id == a
    assert {m: g.members[m].assignment for m in g.members} == {a: f"a-{a}".encode(), b: f"a-{b}".encode()}
    assert fresh.heartbeat("g", b, 1, now_ms=h.now).response.error is Errors.NONE
    assert "deleted" not in fresh.groups
    assert fresh.groups["simple"].state is GroupState.EMPTY
    for group in ("g", "simple"):
        assert fresh.fetch_offsets(group).response == h.c.fetch_offsets(group).response
    # producer 5's offsets are still pending after the reload; its marker makes them visible
    assert fresh.has_pending_txn_offsets("g")
    fresh.complete_txn(5, True, now_ms=h.now)
    assert [p.offset for p in fresh.fetch_offsets("g", [("t", 0)]).response.partitions] == [99]


def test_docs_worked_example_matches_the_code():
    from pathlib import Path

    doc = Path(__file__).resolve().parents[3] / "docs" / "groups.md"
    text = doc.read_text()

    def hexes(raw: bytes) -> str:
        return " ".join(f"{b:02x}" for b in raw)

    key = encode_key(OffsetCommitKey("g1", "t", 0))
    value = encode_offset_commit_value(OffsetCommitValue(42, 3, "", 1700000000000))
    flat = " ".join(text.replace("|", " ").split())
    assert hexes(key) in flat and hexes(value) in flat
    assert partition_for("g1", 50) == 42 and "(partition 42 of 50)" in text
