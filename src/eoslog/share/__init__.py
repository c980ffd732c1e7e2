"""Share groups (KIP-932, Kafka 4.2's "queues"): the pure cores of docs/share-groups.md, step 1.

``partition_state`` is one share partition on its leader (record states, acquire, acknowledge, lock
expiry, delivery limit, SPSO/SPEO, what to persist); ``record_state`` its one transition table;
``in_flight`` the values and run arithmetic it is made of; ``sessions`` ShareFetch's share sessions;
``transactional_acks`` acknowledgements held by a transaction until its marker (step 6).
Nothing here does I/O or reads a clock.
"""

from eoslog.share.errors import ShareError
from eoslog.share.in_flight import (
    AcknowledgementBatch,
    AcquiredRecords,
    InFlightBatch,
    OffsetRange,
    PersistedState,
    StateBatch,
)
from eoslog.share.partition_state import (
    Acknowledgement,
    AcquireMode,
    Acquisition,
    Change,
    Release,
    SharePartition,
    SharePartitionConfig,
)
from eoslog.share.record_state import AcknowledgeType, Event, IllegalRecordTransition, RecordState
from eoslog.share.sessions import SessionUpdate, ShareSession, ShareSessionKey, ShareSessions

__all__ = [
    "AcknowledgeType",
    "Acknowledgement",
    "AcknowledgementBatch",
    "AcquireMode",
    "AcquiredRecords",
    "Acquisition",
    "Change",
    "Event",
    "IllegalRecordTransition",
    "InFlightBatch",
    "OffsetRange",
    "PersistedState",
    "RecordState",
    "Release",
    "SessionUpdate",
    "ShareError",
    "SharePartition",
    "SharePartitionConfig",
    "ShareSession",
    "ShareSessionKey",
    "ShareSessions",
    "StateBatch",
]
