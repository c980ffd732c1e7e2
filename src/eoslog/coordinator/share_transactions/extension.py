"""AddSharePartitionsToTxn, AddOffsetsToTxn's counterpart for share groups: an extension of the transaction
coordinator that uses only its :class:`TransactionEngine` (coordinator/transaction/engine.py).

Contract
- Before a transactional producer acknowledges share records in its transaction (ShareAcknowledgeTxn, at
  the share partition's leader), it registers each share partition here. What joins the transaction is
  the ``__share_group_state`` partition holding that share partition's state (the share coordinator's key
  ``group:topicId:partition``), as AddOffsetsToTxn adds the group's ``__consumer_offsets`` partition: the
  COMMIT or ABORT marker then lands where the share coordinator reads it, and the consumed partition never
  gets one (which would hold back its last stable offset for every read_committed reader).
- The producer id and epoch are checked by the core's ``add_partitions_to_txn`` (a zombie is
  PRODUCER_FENCED before anything reaches a share partition); the leader later asks whether the partition is
  in the ongoing transaction at that epoch (KIP-890's verification) before it applies anything.
- Owns nothing durable: the transaction's partitions are the coordinator's metadata. Only the broker's event
  loop calls it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from eoslog.cluster.topics import SHARE_GROUP_STATE
from eoslog.coordinator.share.log_format import SharePartitionKey
from eoslog.coordinator.transaction import decisions as d
from eoslog.coordinator.transaction.decisions import TxnError
from eoslog.coordinator.transaction.metadata import TopicPartition
from eoslog.protocol.coordinator_partition import partition_for
from eoslog.protocol.errors import CoordinatorNotAvailableError, ErrorCode

if TYPE_CHECKING:
    from eoslog.coordinator.transaction.engine import TransactionEngine


def share_state_partition(key: SharePartitionKey, partition_count: int) -> TopicPartition:
    """The ``__share_group_state`` partition of a share partition (FindCoordinator key type 2's hash)."""
    return TopicPartition(SHARE_GROUP_STATE, partition_for(key.coordinator_key(), partition_count))


class ShareTransactions:
    def __init__(self, engine: TransactionEngine, share_state_partitions: Callable[[], int]) -> None:
        """``share_state_partitions()``: the partition count of ``__share_group_state``, the topic created on
        first use (raises CoordinatorNotAvailableError while it cannot be)."""
        self.engine = engine
        self._share_state_partitions = share_state_partitions

    async def add_share_partitions_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                          group_id: str, partitions: Iterable[tuple[uuid.UUID, int]]) -> ErrorCode:
        refusal = self.engine.admit(transactional_id)
        if refusal is not None:
            return ErrorCode[refusal.value]
        try:
            count = self._share_state_partitions()
        except CoordinatorNotAvailableError:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        keys = [SharePartitionKey(group_id, topic_id, index) for topic_id, index in partitions]
        if not keys or any(key.partition < 0 for key in keys):
            return ErrorCode.INVALID_REQUEST
        tps = sorted({share_state_partition(key, count) for key in keys})
        metadata = self.engine.get(transactional_id)
        decision = d.add_partitions_to_txn(metadata, transactional_id, producer_id, producer_epoch, tps,
                                           self.engine.now_ms())
        error = await self.engine.carry_out(transactional_id, metadata, decision)
        return ErrorCode[error.value]

    # ---- the extension's part of the coordinator's life: nothing of its own --------------------------

    def load(self, index: int, records) -> None:
        pass

    def unload(self, index: int) -> None:
        pass

    def recover(self, index: int) -> int:
        return 0

    def admit(self, transactional_id: str) -> TxnError | None:
        return None

    async def on_timer(self, now_ms: int, expiration_due: bool) -> None:
        pass
