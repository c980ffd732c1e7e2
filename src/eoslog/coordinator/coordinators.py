"""The broker's coordinators as the request handlers find them: the group coordinator, the transaction
coordinator and its extensions, the share coordinator, each a shard of the coordinator runtime (runtime.py),
built on first use; and the questions about internal topics that need no shard built.

A new coordinator is its package (pure core + shard) and a ``register`` with the runtime
(server/broker.py); its handlers reach it with :meth:`Coordinators.shard`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from eoslog.cluster.topics import CONSUMER_OFFSETS, SHARE_GROUP_STATE, TRANSACTION_STATE
from eoslog.coordinator.runtime import CoordinatorRuntime, Ownership
from eoslog.protocol.coordinator_partition import partition_for

if TYPE_CHECKING:
    from eoslog.coordinator.check_back.extension import CheckBacks
    from eoslog.coordinator.group.shard import GroupShard
    from eoslog.coordinator.share.shard import ShareShard
    from eoslog.coordinator.share_transactions.extension import ShareTransactions
    from eoslog.coordinator.transaction.markers import TransactionMarkerChannel
    from eoslog.coordinator.transaction.shard import TransactionShard
    from eoslog.coordinator.transaction_groups.extension import TransactionGroups


class Coordinators:
    def __init__(self, runtime: CoordinatorRuntime, markers: Callable[[], TransactionMarkerChannel]) -> None:
        """``markers()``: the broker's transaction marker channel (the transaction coordinator's markers
        and the WriteTxnMarkers API's), built on first use."""
        self.runtime = runtime
        self._markers_factory = markers
        self._markers: TransactionMarkerChannel | None = None

    def shard(self, topic: str) -> Any:
        """The shard coordinating keys of internal topic ``topic``."""
        return self.runtime.shard(topic)

    @property
    def groups(self) -> GroupShard:
        return self.runtime.shard(CONSUMER_OFFSETS)

    @property
    def transactions(self) -> TransactionShard:
        return self.runtime.shard(TRANSACTION_STATE)

    @property
    def shares(self) -> ShareShard:
        """The share coordinator (KIP-932): the state of share partitions, in ``__share_group_state``."""
        return self.runtime.shard(SHARE_GROUP_STATE)

    @property
    def transaction_groups(self) -> TransactionGroups:
        from eoslog.coordinator.transaction_groups.extension import TransactionGroups

        return self.transactions.extension(TransactionGroups)

    @property
    def share_transactions(self) -> ShareTransactions:
        from eoslog.coordinator.share_transactions.extension import ShareTransactions

        return self.transactions.extension(ShareTransactions)

    @property
    def check_backs(self) -> CheckBacks:
        from eoslog.coordinator.check_back.extension import CheckBacks

        return self.transactions.extension(CheckBacks)

    @property
    def markers(self) -> TransactionMarkerChannel:
        if self._markers is None:
            self._markers = self._markers_factory()
        return self._markers

    # ---- internal topics, without building a shard -------------------------------------------------

    def ensure_topic(self, topic: str) -> None:
        self.runtime.ensure_topic(topic)

    def partition_count(self, topic: str) -> int:
        return self.runtime.partition_count(topic)

    def transaction_ownership(self, transactional_id: str) -> Ownership:
        """Whether this broker coordinates ``transactional_id`` now (NOT_COORDINATOR: another broker does)."""
        index = partition_for(transactional_id, self.runtime.partition_count(TRANSACTION_STATE))
        return self.runtime.ownership(TRANSACTION_STATE, index)
