"""The share group records (types 10-15 in ``__consumer_offsets``): golden bytes written by hand from
Kafka's ShareGroup*.json specs, round trips, what a damaged value does, and what the loader keeps."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eoslog.coordinator.group import GroupConfig, LogEntry
from eoslog.coordinator.group.errors import CorruptGroupRecordError
from eoslog.coordinator.group.log_format import GroupMetadataKey, encode_group_metadata_key, load
from eoslog.coordinator.group.share_group import ShareGroup, ShareMember
from eoslog.coordinator.group.share_initialization import TopicPartitions
from eoslog.coordinator.group.share_log_format import (
    current_member_assignment_value,
    decode_key,
    group_metadata_value,
    group_records,
    key,
    member_metadata_value,
    rebuild,
    state_partition_metadata_value,
    target_assignment_member_value,
    target_assignment_metadata_value,
    tombstone_order,
)

T = uuid.UUID("0123456789abcdef0123456789abcdef")
TB = bytes.fromhex("0123456789abcdef0123456789abcdef")


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", "").replace("|", ""))


# ---- golden bytes ----------------------------------------------------------------------------------------

def test_keys():
    # int16 record type, then int16-length strings (key version 0, not flexible)
    assert key(10, "g", "m1") == h("000a | 0001 67 | 0002 6d31")
    assert key(11, "g") == h("000b | 0001 67")
    assert key(12, "g") == h("000c | 0001 67")
    assert key(13, "g", "m1") == h("000d | 0001 67 | 0002 6d31")
    assert key(14, "g", "m1") == h("000e | 0001 67 | 0002 6d31")
    assert decode_key(h("000e 0001 67 0002 6d31")) == (14, "g", "m1")
    assert decode_key(h("000b 0001 67")) == (11, "g", None)


def test_member_metadata_value():
    m = ShareMember("m1", rack_id=None, client_id="c", client_host="/h", subscribed_topic_names=("t", "uu"))
    # version | RackId null | "c" | "/h" | 2 names: "t", "uu" | no tags
    assert member_metadata_value(m) == h("0000 | 00 | 02 63 | 03 2f68 | 03 02 74 03 7575 | 00")
    m.rack_id, m.subscribed_topic_names = "r", ()
    assert member_metadata_value(m) == h("0000 | 02 72 | 02 63 | 03 2f68 | 01 | 00")


def test_group_metadata_value():
    # Epoch, then the tag section: MetadataHash is tag 0, an int64, left out while it is 0.
    assert group_metadata_value(5, 0) == h("0000 | 00000005 | 00")
    assert group_metadata_value(5, 0x0102030405060708) == h("0000 | 00000005 | 01 00 08 0102030405060708")
    assert group_metadata_value(-1, -2) == h("0000 | ffffffff | 01 00 08 fffffffffffffffe")


def test_target_assignment_values():
    assert target_assignment_metadata_value(7) == h("0000 | 00000007 | 00")
    # one topic: id, 2 partitions, its tags; the value's tags
    assert target_assignment_member_value({T: frozenset({2, 0})}) == \
        h("0000 | 02 |") + TB + h("03 00000000 00000002 | 00 | 00")
    assert target_assignment_member_value({}) == h("0000 | 01 | 00")


def test_current_member_assignment_value():
    m = ShareMember("m1", member_epoch=3, previous_member_epoch=2, assigned={T: frozenset({1})})
    assert current_member_assignment_value(m) == h("0000 | 00000003 | 00000002 | 00 | 02 |") + TB + \
        h("02 00000001 | 00 | 00")
    fresh = ShareMember("m2")  # Kafka's new member: epoch 0, previous -1
    assert current_member_assignment_value(fresh) == h("0000 | 00000000 | ffffffff | 00 | 01 | 00")


def test_docs_worked_example_matches_the_code():
    from eoslog.coordinator.group import GroupCoordinator
    from eoslog.coordinator.group.share_assignor import TopicMetadata
    from eoslog.coordinator.group.share_group import ShareHeartbeat

    c = GroupCoordinator()
    topic = uuid.UUID("00000000-0000-0000-0000-000000000007")
    c.share_group_heartbeat("g", ShareHeartbeat("m1", 0, subscribed_topic_names=("t",), client_id="c",
                                                 client_host="/h"), topics={"t": TopicMetadata(topic, 2)}, now_ms=0)
    doc = (Path(__file__).resolve().parents[3] / "docs" / "groups.md").read_text()
    section = doc[doc.index("### Share group records"):]
    flat = re.sub(r"\s+", "", section)
    for k, v in group_records(c.share.groups["g"]).items():
        assert k.hex() in flat and v.hex() in flat, (k.hex(), v.hex())


# ---- round trips ----------------------------------------------------------------------------------------

names = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=6)
assignments = st.dictionaries(st.uuids(), st.frozensets(st.integers(0, 2**31 - 1), min_size=1, max_size=4), max_size=3)


@st.composite
def share_groups(draw):
    group = ShareGroup(draw(names), GroupConfig())
    group.group_epoch = draw(st.integers(0, 2**31 - 1))
    group.assignment_epoch = draw(st.integers(0, group.group_epoch))
    group.metadata_hash = draw(st.integers(-2**63, 2**63 - 1))
    for member_id in draw(st.lists(names, max_size=4, unique=True)):
        member = ShareMember(member_id, draw(st.none() | names), draw(names), draw(names),
                             tuple(sorted(draw(st.sets(names, max_size=3)))), draw(st.integers(-1, 2**31 - 1)),
                             draw(st.integers(-1, 2**31 - 1)), assigned=draw(assignments))
        group.members[member_id] = member
        group.target[member_id] = draw(assignments)
    group.refresh_state()
    return group


@given(share_groups())
def test_records_round_trip(group):
    records = group_records(group)
    back = rebuild(group.group_id, records, GroupConfig(), now_ms=0)
    assert group_records(back) == records
    assert back.state is group.state and back.metadata_hash == group.metadata_hash


# ---- damaged values -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("record_type", "value"), [
    (12, h("0001 00000007 00")),  # value version 1: not one Kafka 4.2 writes
    (12, h("0000 00000007")),  # no tag section
    (12, h("0000 00000007 00 ff")),  # trailing byte
    (12, h("0000 000000")),  # truncated
    (11, h("0000 00000005 01 00 04 00000001")),  # MetadataHash of 4 bytes
    (14, h("0000 00000001 00000000 05 01 00")),  # a member state eoslog never writes
    (10, h("0000 00 02 63 00 01 00")),  # ClientHost null
    (13, h("0000 00 00")),  # TopicPartitions null
    (13, h("0000 ff ff ff ff ff 00")),  # a varint longer than five bytes
])
def test_a_damaged_value_is_refused(record_type, value):
    k = key(record_type, "g", "m" if record_type in (10, 13, 14) else None)
    with pytest.raises(CorruptGroupRecordError):
        rebuild("g", {k: value}, GroupConfig(), now_ms=0)


def test_unknown_tags_are_skipped():
    # A newer Kafka's tagged field (here tag 1 on the target epoch, tag 5 on a topic entry) loads.
    records = {
        key(12, "g"): h("0000 00000007 01 01 08 0000000000003039"),
        key(13, "g", "m"): h("0000 02") + TB + h("02 00000004 01 05 01 ff 00"),
    }
    group = rebuild("g", records, GroupConfig(), now_ms=0)
    assert group.assignment_epoch == 7 and group.target["m"] == {T: frozenset({4})}


def test_a_key_that_is_no_share_group_record_is_refused():
    with pytest.raises(CorruptGroupRecordError):
        decode_key(h("0009 0001 67"))  # Kafka 4.0's ShareGroupPartitionMetadata: no longer written
    with pytest.raises(CorruptGroupRecordError):
        decode_key(h("000b 0001 67 00"))


# ---- loading ----------------------------------------------------------------------------------------------

def entries(*records):
    return [LogEntry(i, k, v) for i, (k, v) in enumerate(records)]


def test_the_loader_keeps_the_last_value_and_applies_tombstones():
    group = ShareGroup("g", GroupConfig())
    group.members["m"] = ShareMember("m", client_id="c")
    group.group_epoch = group.assignment_epoch = 1
    records = list(group_records(group).items())
    loaded = load(entries(*records))
    assert loaded.share_groups == {"g": dict(records)}
    # A leave: the member's tombstones and the next epoch; then the group's own (a deletion).
    leave = [(k, None) for k in tombstone_order(k for k, _ in records if decode_key(k)[2] is not None)]
    leave.append((key(11, "g"), group_metadata_value(2, 0)))
    loaded = load(entries(*records, *leave))
    assert set(loaded.share_groups["g"]) == {key(11, "g"), key(12, "g")}
    loaded = load(entries(*records, *leave, (key(12, "g"), None), (key(11, "g"), None)))
    assert loaded.share_groups == {}


def test_state_partition_metadata_golden_bytes_and_round_trip():
    """Type 15 (ShareGroupStatePartitionMetadata): topic T initializing partitions 0 and 1 since 1000, topic
    "u" (id 00..01) initialized with partition 2 since 5, nothing being deleted."""
    u = uuid.UUID(int=1)
    group = ShareGroup("g", GroupConfig())
    group.state_partitions.initializing[T] = TopicPartitions("t", frozenset({0, 1}), 1000)
    group.state_partitions.initialized[u] = TopicPartitions("u", frozenset({2}), 5)
    value = state_partition_metadata_value(group.state_partitions)
    assert value == h("0000 | 02" + TB.hex() + "02 74 | 03 00000000 00000001 | 00000000000003e8 00"
                      "| 02" + u.bytes.hex() + "02 75 | 02 00000002 | 0000000000000005 00 | 01 | 00")
    records = group_records(group)
    assert records[key(15, "g")] == value
    rebuilt = rebuild("g", records, GroupConfig(), now_ms=0)
    assert rebuilt.state_partitions == group.state_partitions
    assert rebuilt.state_partitions.is_initialized(u, 2) and not rebuilt.state_partitions.is_initialized(T, 0)
    loaded = load(entries((key(15, "g"), value)))
    assert loaded.share_groups == {"g": {key(15, "g"): value}}
    # its tombstone comes last, after the group's own
    assert tombstone_order([key(15, "g"), key(11, "g")]) == [key(11, "g"), key(15, "g")]
    with pytest.raises(CorruptGroupRecordError):
        rebuild("g", {key(15, "g"): value[:-3]}, GroupConfig(), now_ms=0)


def test_a_group_without_share_state_writes_no_type_15():
    assert key(15, "g") not in group_records(ShareGroup("g", GroupConfig()))


def test_the_later_group_type_wins():
    share = (key(11, "g"), group_metadata_value(1, 0))
    classic_tombstone = (encode_group_metadata_key(GroupMetadataKey("g")), None)
    consumer = (h("0003 0001 67"), h("0000 00000001"))
    assert set(load(entries(share)).share_groups) == {"g"}
    assert load(entries(share, consumer)).share_groups == {} and set(load(entries(share, consumer)).consumer_groups) == {"g"}
    assert load(entries(consumer, share)).consumer_groups == {} and set(load(entries(consumer, share)).share_groups) == {"g"}
    # a tombstone of another type does not remove a share group
    assert set(load(entries(share, classic_tombstone)).share_groups) == {"g"}
