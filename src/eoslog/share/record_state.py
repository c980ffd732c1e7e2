"""The state machine of one record in a share partition (KIP-932): one enum, its events, one table.

A record of a share partition is Available (anyone may get it), Acquired (handed to one member under
an acquisition lock), Acknowledged (ACCEPT: done) or Archived (rejected, not a record, or delivered too
often: done, never delivered again). The ids are Kafka's RecordState ids (server/share/fetch/RecordState.java)
and the DeliveryState byte of the share coordinator's StateBatches (ShareSnapshotValue.json), so they are
written out and never renumbered. Kafka never persists Acquired: a lock does not survive a leader change,
so :attr:`RecordState.persisted` writes an acquired record as Available with its raised delivery count.

Every move of a record goes through :func:`transition` and :data:`TRANSITIONS`; a (state, event) pair
that is not in the table raises :class:`IllegalRecordTransition`, a bug in the share partition core, never
a client's fault (a client's bad acknowledgement is refused before any move, see partition_state.py).

The delivery count limit (``group.share.delivery.count.limit``) is part of the table: each row names the
state to enter below the limit and the state to enter when the record's delivery count has reached it.
That is Kafka's rule (InFlightState.tryUpdateState): a record that would become Available again with its
count at the limit is archived instead, and a record at the limit is never acquired again.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, IntEnum


class RecordState(Enum):
    """The state of one in-flight record. ``value`` is Kafka's persisted byte id."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    # 3 is Kafka's ARCHIVING (the share-group dead-letter queue work that came after 4.2): never reused here.
    ARCHIVED = 4
    # A record acknowledged inside an open transaction (step 6) needs no state of its own: it stays ACQUIRED,
    # owned by the transaction under a lock that never runs out, and its marker moves it by the rows below
    # (share/transactional_acks.py).

    @property
    def is_done(self) -> bool:
        """Acknowledged or archived: Kafka's "terminal" states, which the start offset may move past."""
        return self in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)

    @property
    def persisted(self) -> RecordState:
        """The state the share coordinator stores: an acquisition lock never outlives its leader."""
        return RecordState.AVAILABLE if self is RecordState.ACQUIRED else self

    @classmethod
    def from_id(cls, state_id: int) -> RecordState:
        try:
            return cls(state_id)
        except ValueError:
            raise UnknownRecordState(f"unknown share record state id {state_id}") from None


class AcknowledgeType(IntEnum):
    """ShareFetch / ShareAcknowledge's AcknowledgeTypes bytes (IntEnum: they arrive as wire ints)."""

    GAP = 0  # the offset is not a record (compacted away, a control batch): done, like a reject
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4  # KIP-1222 (ShareFetch / ShareAcknowledge v2): the acquisition lock starts again


class Event(Enum):
    """What can happen to a record."""

    ACQUIRE = "acquire"  # ShareFetch hands it to a member
    ACCEPT = "accept"
    RELEASE = "release"
    REJECT = "reject"
    GAP = "gap"
    RENEW = "renew"
    LOCK_TIMEOUT = "lock timeout"  # the acquisition lock ran out
    MEMBER_RELEASE = "member release"  # the member's share session closed or its connection went away
    SKIP = "skip"  # never delivered: an aborted transaction's record, or gone from the log


ACKNOWLEDGE_EVENTS: dict[AcknowledgeType, Event] = {
    AcknowledgeType.GAP: Event.GAP,
    AcknowledgeType.ACCEPT: Event.ACCEPT,
    AcknowledgeType.RELEASE: Event.RELEASE,
    AcknowledgeType.REJECT: Event.REJECT,
    AcknowledgeType.RENEW: Event.RENEW,
}


@dataclass(frozen=True)
class Transition:
    to: RecordState  # below the delivery count limit
    at_limit: RecordState  # when the record's delivery count has reached the limit
    delivery_count_delta: int = 0  # applied only when entering ``to``: an archived record is not delivered


S = RecordState
E = Event

# (state, event) -> Transition. The only table of record transitions; anything else is an error.
TRANSITIONS: dict[tuple[RecordState, Event], Transition] = {
    # ShareFetch: the delivery count rises when the record is handed out (Kafka's DeliveryCountOps.INCREASE).
    # A record whose count already reached the limit (the limit was lowered, or a snapshot says so) is
    # archived instead of delivered once more.
    (S.AVAILABLE, E.ACQUIRE): Transition(S.ACQUIRED, S.ARCHIVED, 1),
    # Not deliverable: a record of an aborted transaction under read_committed (Kafka archives those at
    # acquisition, SharePartition.filterAbortedTransactionalAcquiredRecords), or an offset that the log no
    # longer has (compaction, retention: Kafka's maybeArchiveStaleBatches / updateCacheAndOffsets).
    (S.AVAILABLE, E.SKIP): Transition(S.ARCHIVED, S.ARCHIVED),
    (S.ACQUIRED, E.ACCEPT): Transition(S.ACKNOWLEDGED, S.ACKNOWLEDGED),
    # Kafka's ACK_TYPE_TO_RECORD_STATE maps a gap to ARCHIVED, like a reject.
    (S.ACQUIRED, E.REJECT): Transition(S.ARCHIVED, S.ARCHIVED),
    (S.ACQUIRED, E.GAP): Transition(S.ARCHIVED, S.ARCHIVED),
    (S.ACQUIRED, E.RELEASE): Transition(S.AVAILABLE, S.ARCHIVED),
    (S.ACQUIRED, E.RENEW): Transition(S.ACQUIRED, S.ACQUIRED),
    (S.ACQUIRED, E.LOCK_TIMEOUT): Transition(S.AVAILABLE, S.ARCHIVED),
    # Kafka 4.2 counts a delivery released by a closed session like any release (KAFKA-19972): a member
    # that crashes on a poison record must not get it forever.
    (S.ACQUIRED, E.MEMBER_RELEASE): Transition(S.AVAILABLE, S.ARCHIVED),
}


class UnknownRecordState(ValueError):
    """A persisted DeliveryState byte that is not one of Kafka's record states."""


class IllegalRecordTransition(RuntimeError):
    """A (state, event) pair not in TRANSITIONS was attempted: a bug in the share partition core."""

    def __init__(self, state: RecordState, event: Event) -> None:
        self.state = state
        self.event = event
        super().__init__(f"illegal share record transition: {event.value} in {state.name}")


def transition(state: RecordState, event: Event, delivery_count: int, delivery_count_limit: int
               ) -> tuple[RecordState, int]:
    """The state and delivery count after ``event``; raises IllegalRecordTransition if not in the table."""
    row = TRANSITIONS.get((state, event))
    if row is None:
        raise IllegalRecordTransition(state, event)
    if delivery_count >= delivery_count_limit:
        return row.at_limit, delivery_count
    return row.to, delivery_count + row.delivery_count_delta
