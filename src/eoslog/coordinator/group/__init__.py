"""The classic consumer-group coordinator (JoinGroup / SyncGroup / Heartbeat / LeaveGroup and
committed offsets), as a core without I/O. See docs/groups.md."""

from eoslog.coordinator.group.config import GroupConfig
from eoslog.coordinator.group.coordinator import GroupCoordinator
from eoslog.coordinator.group.errors import CorruptGroupRecordError, Errors, GroupCoordinatorError
from eoslog.coordinator.group.group import ClassicGroup
from eoslog.coordinator.group.log_format import LogEntry, Marker, partition_for
from eoslog.coordinator.group.offset_apis import PartitionCommit
from eoslog.coordinator.group.offsets import OffsetAndMetadata, TopicPartition
from eoslog.coordinator.group.results import Completion, Pending, Result, Write
from eoslog.coordinator.group.state import GroupState

__all__ = [
    "ClassicGroup", "Completion", "CorruptGroupRecordError", "Errors", "GroupConfig", "GroupCoordinator",
    "GroupCoordinatorError", "GroupState", "LogEntry", "Marker", "OffsetAndMetadata", "PartitionCommit",
    "Pending", "Result", "TopicPartition", "Write", "partition_for",
]
