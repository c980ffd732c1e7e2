"""The transaction-group record in ``__transaction_state``: key and value bytes, and loading. No I/O.

The layout is documented once, in docs/transactions.md ("Transaction groups"). In short (big-endian,
Kafka's STRING = int16 length + UTF-8, ARRAY = int32 count):

    key    int16 key_version (0x7E00) | STRING group_name
    value  int16 value_version (0) | int64 sequence | int8 state | int64 timestamp_ms
           | ARRAY(STRING transactional_id, int64 producer_id, int16 producer_epoch) members

The key version tells a group record from a transactional id's (key version 0), so
``log_format.load_state`` skips it and :func:`load_groups` takes only these. A record without a value (a
tombstone) forgets the group. Compaction keeps the newest record per group, which is all a group needs.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

from eoslog.coordinator.transaction.log_format import TransactionLogFormatError, _Reader, key_version

GROUP_KEY_VERSION = 0x7E00
GROUP_VALUE_VERSION = 0
NO_SEQUENCE = -1
NO_TIMESTAMP = -1

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_VALUE_HEAD = struct.Struct(">hqbq")  # version, sequence, state, timestamp_ms
_MEMBER_TAIL = struct.Struct(">qh")  # producer_id, producer_epoch


class GroupState(Enum):
    """Where a group's last decision stands. ``value`` is the persisted int8."""

    # The commit point is logged; members may still be Ongoing or PrepareCommit (roll forward on load).
    PREPARE_COMMIT = 0
    # Every member reached CompleteCommit (or moved on after it): nothing left to do.
    COMPLETE_COMMIT = 1


# For each state, the states a group may enter it from (None: the group is new or was forgotten). A
# commit may only start once the previous one is complete, so at most one decision per group is open.
VALID_PREVIOUS_GROUP_STATES: dict[GroupState, frozenset[GroupState | None]] = {
    GroupState.PREPARE_COMMIT: frozenset({None, GroupState.COMPLETE_COMMIT}),
    GroupState.COMPLETE_COMMIT: frozenset({GroupState.PREPARE_COMMIT}),
}


class IllegalGroupTransition(RuntimeError):
    """A group move not in VALID_PREVIOUS_GROUP_STATES: a coordinator bug, never a client's."""


def check_group_transition(group_name: str, from_state: GroupState | None, to_state: GroupState) -> None:
    if from_state not in VALID_PREVIOUS_GROUP_STATES[to_state]:
        raise IllegalGroupTransition(f"transaction group {group_name!r}: illegal transition "
                                     f"{from_state and from_state.name} -> {to_state.name}")


class GroupMember(NamedTuple):
    """One Kafka transaction of a group, named by its producer identity."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


@dataclass(frozen=True)
class GroupRecord:
    """A group's newest decision: what is logged, and what the coordinator keeps in memory."""

    group_name: str
    sequence: int
    state: GroupState
    timestamp_ms: int
    members: tuple[GroupMember, ...]

    def completed(self, timestamp_ms: int) -> GroupRecord:
        check_group_transition(self.group_name, self.state, GroupState.COMPLETE_COMMIT)
        return GroupRecord(self.group_name, self.sequence, GroupState.COMPLETE_COMMIT,
                           max(timestamp_ms, self.timestamp_ms), self.members)


def _encode_string(s: str) -> bytes:
    raw = s.encode("utf-8")
    if len(raw) > 0x7FFF:
        raise ValueError(f"string of {len(raw)} bytes does not fit a Kafka STRING")
    return _INT16.pack(len(raw)) + raw


def encode_group_key(group_name: str) -> bytes:
    return _INT16.pack(GROUP_KEY_VERSION) + _encode_string(group_name)


def encode_group_value(record: GroupRecord) -> bytes:
    out = bytearray(_VALUE_HEAD.pack(GROUP_VALUE_VERSION, record.sequence, record.state.value,
                                     record.timestamp_ms))
    out += _INT32.pack(len(record.members))
    for member in record.members:
        out += _encode_string(member.transactional_id)
        out += _MEMBER_TAIL.pack(member.producer_id, member.producer_epoch)
    return bytes(out)


def decode_group_key(key: bytes | memoryview) -> str:
    r = _Reader(key)
    (version,) = r.unpack(_INT16)
    if version != GROUP_KEY_VERSION:
        raise TransactionLogFormatError(f"not a transaction-group key (key version {version})")
    name = r.string()
    r.done()
    return name


def decode_group_value(group_name: str, value: bytes | memoryview) -> GroupRecord:
    r = _Reader(value)
    version, sequence, state_id, timestamp_ms = r.unpack(_VALUE_HEAD)
    if version != GROUP_VALUE_VERSION:
        raise TransactionLogFormatError(f"unknown transaction-group value version {version}")
    try:
        state = GroupState(state_id)
    except ValueError:
        raise TransactionLogFormatError(f"unknown transaction-group state {state_id}") from None
    (count,) = r.unpack(_INT32)
    if count < 0:
        raise TransactionLogFormatError(f"bad member array length {count}")
    members = []
    for _ in range(count):
        transactional_id = r.string()
        producer_id, producer_epoch = r.unpack(_MEMBER_TAIL)
        members.append(GroupMember(transactional_id, producer_id, producer_epoch))
    r.done()
    return GroupRecord(group_name, sequence, state, timestamp_ms, tuple(members))


def is_group_key(key: bytes | memoryview) -> bool:
    return key_version(key) == GROUP_KEY_VERSION


def load_groups(records: Iterable[tuple[bytes | memoryview, bytes | memoryview | None]]
                ) -> dict[str, GroupRecord]:
    """The groups of one ``__transaction_state`` partition, read from its start: (key, value) in log
    order, the newest record per group wins, a tombstone forgets the group. Other keys are skipped."""
    groups: dict[str, GroupRecord] = {}
    for key, value in records:
        if not is_group_key(key):
            continue
        name = decode_group_key(key)
        if value is None:
            groups.pop(name, None)
        else:
            groups[name] = decode_group_value(name, value)
    return groups
