"""How the rest of the broker reaches the share coordinator (Kafka's Persister): the group coordinator
initializes and deletes share-partition state, the share-partition manager (share/manager.py) reads and
writes it.

Contract
- One method per share partition and operation, each answering a :class:`ShareAnswer` (an error code,
  NONE when the state is durable, and the state for a read or a summary). Callers retry retriable
  errors (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS) as they see fit.
- :class:`LocalPersister` calls this broker's share coordinator in-process: a single node coordinates
  every ``__share_group_state`` partition itself. A cluster (issue 37, step 4) puts Kafka's RPCs 83-87
  behind the same interface, sent to the coordinator FindCoordinator (key type 2) names; the callers do
  not change.
- Called on the broker's event loop only.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Protocol

from eoslog.cluster.topics import SHARE_GROUP_STATE
from eoslog.coordinator.share.log_format import NO_DELIVERY_COMPLETE_COUNT, StateBatch
from eoslog.coordinator.share.shard import ShareAnswer
from eoslog.protocol.errors import CoordinatorNotAvailableError, ErrorCode

if TYPE_CHECKING:
    from eoslog.coordinator.coordinators import Coordinators


class Persister(Protocol):
    async def initialize_state(self, group_id: str, topic_id: uuid.UUID, partition: int, *, state_epoch: int,
                               start_offset: int) -> ShareAnswer: ...

    async def read_state(self, group_id: str, topic_id: uuid.UUID, partition: int, *,
                         leader_epoch: int) -> ShareAnswer: ...

    async def write_state(self, group_id: str, topic_id: uuid.UUID, partition: int, *, state_epoch: int,
                          leader_epoch: int, start_offset: int, state_batches: Iterable[StateBatch],
                          delivery_complete_count: int = NO_DELIVERY_COMPLETE_COUNT) -> ShareAnswer: ...

    async def delete_state(self, group_id: str, topic_id: uuid.UUID, partition: int) -> ShareAnswer: ...

    async def read_state_summary(self, group_id: str, topic_id: uuid.UUID, partition: int) -> ShareAnswer: ...


class LocalPersister:
    """The share coordinator of this broker, called in-process. ``__share_group_state`` is created on
    first use, as FindCoordinator creates ``__transaction_state``."""

    def __init__(self, coordinators: Callable[[], Coordinators]) -> None:
        self._coordinators = coordinators

    def _shard(self):
        coordinators = self._coordinators()
        coordinators.ensure_topic(SHARE_GROUP_STATE)
        return coordinators.shares

    async def _call(self, operation: str, *args, **kwargs) -> ShareAnswer:
        try:
            shard = self._shard()
        except CoordinatorNotAvailableError as exc:
            return ShareAnswer(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(exc))
        return await getattr(shard, operation)(*args, **kwargs)

    async def initialize_state(self, group_id, topic_id, partition, *, state_epoch, start_offset) -> ShareAnswer:
        return await self._call("initialize_state", group_id, topic_id, partition, state_epoch=state_epoch,
                                start_offset=start_offset)

    async def read_state(self, group_id, topic_id, partition, *, leader_epoch) -> ShareAnswer:
        return await self._call("read_state", group_id, topic_id, partition, leader_epoch=leader_epoch)

    async def write_state(self, group_id, topic_id, partition, *, state_epoch, leader_epoch, start_offset,
                          state_batches, delivery_complete_count=NO_DELIVERY_COMPLETE_COUNT) -> ShareAnswer:
        return await self._call("write_state", group_id, topic_id, partition, state_epoch=state_epoch,
                                leader_epoch=leader_epoch, start_offset=start_offset, state_batches=state_batches,
                                delivery_complete_count=delivery_complete_count)

    async def delete_state(self, group_id, topic_id, partition) -> ShareAnswer:
        return await self._call("delete_state", group_id, topic_id, partition)

    async def read_state_summary(self, group_id, topic_id, partition) -> ShareAnswer:
        return await self._call("read_state_summary", group_id, topic_id, partition)
