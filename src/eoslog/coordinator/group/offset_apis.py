"""The offset entry points of :class:`~.coordinator.GroupCoordinator`: OffsetCommit, TxnOffsetCommit
(and the transaction markers that publish or drop its offsets), OffsetFetch and OffsetDelete, for
classic and consumer groups alike (committed offsets live in one ``OffsetStore`` whatever the group
type). A share group (KIP-932) has no committed offsets: every offset API answers GROUP_ID_NOT_FOUND for
its id, as Kafka's ShareGroup.validateOffset* do. A mixin, split out of coordinator.py by responsibility:
it uses the coordinator's ``_check``, ``_write``, ``_new_token``, ``_get_or_create``, ``groups``,
``consumer``, ``share`` and ``offsets``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from eoslog.coordinator.group.errors import Errors
from eoslog.coordinator.group.group import CONSUMER_PROTOCOL_TYPE, Effects
from eoslog.coordinator.group.offsets import NO_PRODUCER_ID, OffsetAndMetadata, TopicPartition
from eoslog.coordinator.group.results import (
    Completion,
    OffsetCommitResponse,
    OffsetDeleteResponse,
    OffsetFetchResponse,
    PartitionResult,
    Pending,
    Result,
)
from eoslog.coordinator.group.state import GroupState

S = GroupState


class PartitionCommit(NamedTuple):
    """One partition of an OffsetCommit / TxnOffsetCommit request."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""
    commit_timestamp: int = -1  # OffsetCommit v1 only: the client's commit time (-1: the coordinator's now)


class OffsetApis:
    def commit_offsets(self, group_id: str, offsets: Iterable[PartitionCommit], *, member_id: str = "",
                       generation_id: int = -1, group_instance_id: str | None = None,
                       retention_ms: int = -1, api_version: int = 8, now_ms: int) -> Result:
        """OffsetCommit. ``generation_id=-1``: a commit from a client that does not use group management
        (allowed only while the group has no members). A member's commit into a group that does not
        exist is ILLEGAL_GENERATION before v9 and GROUP_ID_NOT_FOUND from v9 (Kafka 4.x)."""
        offsets = [PartitionCommit(*c) for c in offsets]
        error = self._check(group_id, allow_empty_id=True)
        if error is Errors.NONE and group_id in self.share.groups:
            return Result(_commit_error(Errors.GROUP_ID_NOT_FOUND, offsets))
        consumer_group = self.consumer.groups.get(group_id)
        if consumer_group is not None:
            if error is Errors.NONE:
                error = consumer_group.validate_offset_commit(member_id, generation_id,
                                                              partitions=[(c.topic, c.partition) for c in offsets])
            if error is not Errors.NONE:
                return Result(_commit_error(error, offsets))
            expire = now_ms + retention_ms if retention_ms >= 0 else None
            return self._commit(group_id, offsets, now_ms, expire, "offset_commit", member_id, NO_PRODUCER_ID, -1)
        group = self.groups.get(group_id)
        if error is Errors.NONE and group is None and generation_id >= 0:
            # the group is gone, or the commit is from a stale member
            error = Errors.GROUP_ID_NOT_FOUND if api_version >= 9 else Errors.ILLEGAL_GENERATION
        if error is Errors.NONE:
            group = self._get_or_create(group_id, now_ms)
            error = group.validate_offset_commit(member_id, generation_id, group_instance_id, False)
        if error is not Errors.NONE:
            return Result(_commit_error(error, offsets))
        assert group is not None
        group.touch(member_id, now_ms)
        expire = now_ms + retention_ms if retention_ms >= 0 else None
        return self._commit(group_id, offsets, now_ms, expire, "offset_commit", member_id,
                            NO_PRODUCER_ID, -1)

    def txn_commit_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                           offsets: Iterable[PartitionCommit], *, member_id: str = "",
                           generation_id: int = -1, group_instance_id: str | None = None,
                           now_ms: int) -> Result:
        """TxnOffsetCommit: offsets written in the producer's transaction, invisible until its COMMIT
        marker (:meth:`complete_txn`). v3+ carry the member's generation for KIP-447 fencing."""
        offsets = [PartitionCommit(*c) for c in offsets]
        error = self._check(group_id)
        consumer_group = self.consumer.groups.get(group_id)
        if error is Errors.NONE and group_id in self.share.groups:
            error = Errors.GROUP_ID_NOT_FOUND
        elif error is Errors.NONE and consumer_group is not None:
            error = consumer_group.validate_offset_commit(member_id, generation_id, transactional=True,
                                                          partitions=[(c.topic, c.partition) for c in offsets])
        elif error is Errors.NONE:
            group = self._get_or_create(group_id, now_ms)
            error = group.validate_offset_commit(member_id, generation_id, group_instance_id, True)
        if error is not Errors.NONE:
            return Result(_commit_error(error, offsets))
        return self._commit(group_id, offsets, now_ms, None, "txn_offset_commit", member_id,
                            producer_id, producer_epoch)

    def _commit(self, group_id: str, offsets: list[PartitionCommit], now_ms: int, expire: int | None,
                api: str, member_id: str, producer_id: int, producer_epoch: int) -> Result:
        tps = [TopicPartition(c.topic, c.partition) for c in offsets]
        values = [(tp, OffsetAndMetadata(c.offset, c.leader_epoch, c.metadata or "",
                                         now_ms if c.commit_timestamp == -1 else c.commit_timestamp, expire))
                  for tp, c in zip(tps, offsets)]
        refused, plan = self.offsets.prepare_commit(
            group_id, values, metadata_max_bytes=self.config.offset_metadata_max_bytes,
            producer_id=producer_id, producer_epoch=producer_epoch)

        def response(write_error: Errors | None) -> OffsetCommitResponse:
            return OffsetCommitResponse(Errors.NONE, tuple(
                PartitionResult(tp.topic, tp.partition, refused.get(tp, write_error or Errors.NONE))
                for tp in tps))

        if not plan.records:
            return Result(response(None))
        pending = Pending(self._new_token(), api, group_id, member_id)

        def on_done(error: Errors | None, log_offset: int, now: int, fx: Effects) -> None:
            if error is None:
                self.offsets.apply_commit(plan, log_offset)
            else:
                self.offsets.abort_commit(plan)
            fx.completed.append(Completion(pending.token, api, group_id, member_id, response(error)))

        write = self._write(group_id, plan.records, on_done, producer_id=producer_id,
                            producer_epoch=producer_epoch)
        return Result(pending=pending, writes=[write])

    def complete_txn(self, producer_id: int, commit: bool, *, partitions: Iterable[int] | None = None,
                     now_ms: int) -> Result:
        """The producer's COMMIT (``commit=True``) or ABORT marker was written to the given
        ``__consumer_offsets`` partitions (all when None): publish or drop its pending offsets."""
        wanted = None if partitions is None else set(partitions)
        group_ids = [g for g in self.offsets.groups() if wanted is None or self.partition_for(g) in wanted]
        for group_id in self.offsets.complete_txn(producer_id, commit, group_ids):
            if commit and group_id not in self.consumer.groups:
                self._get_or_create(group_id, now_ms)
        return Result()

    def has_pending_txn_offsets(self, group_id: str,
                                topic_partitions: Iterable[TopicPartition] | None = None) -> bool:
        return self.offsets.has_pending_txn_offsets(group_id, topic_partitions)

    def fetch_offsets(self, group_id: str, topic_partitions: Iterable[tuple[str, int]] | None = None, *,
                      require_stable: bool = False, member_id: str | None = None, member_epoch: int = -1) -> Result:
        """OffsetFetch; ``topic_partitions=None`` fetches all. With ``require_stable`` (KIP-447) a
        partition with a commit not yet decided answers UNSTABLE_OFFSET_COMMIT. v9's member of a consumer
        group must exist at that epoch (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH), as in Kafka 4.x."""
        error = self._check(group_id, allow_empty_id=True)
        consumer_group = self.consumer.groups.get(group_id)
        if error is Errors.NONE and group_id in self.share.groups:
            error = Errors.GROUP_ID_NOT_FOUND
        elif error is Errors.NONE and consumer_group is not None and member_id and member_epoch >= 0:
            error = consumer_group.validate_offset_fetch(member_id, member_epoch)
        if error is not Errors.NONE:
            return Result(OffsetFetchResponse(error))
        tps = None if topic_partitions is None else [TopicPartition(t, p) for t, p in topic_partitions]
        return Result(OffsetFetchResponse(Errors.NONE,
                                          tuple(self.offsets.fetch(group_id, tps, require_stable))))

    def delete_offsets(self, group_id: str, topic_partitions: Iterable[tuple[str, int]], *,
                       now_ms: int) -> Result:
        """OffsetDelete (KIP-496): only offsets of topics the group does not consume."""
        tps = [TopicPartition(t, p) for t, p in topic_partitions]
        error = self._check(group_id)
        group = self.groups.get(group_id)
        if error is Errors.NONE and (group is None or group.state is S.DEAD):
            error = Errors.GROUP_ID_NOT_FOUND
        if error is not Errors.NONE:
            return Result(OffsetDeleteResponse(error))
        assert group is not None
        if group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            topics = group.subscribed_topics()
            refused = {tp: Errors.GROUP_SUBSCRIBED_TO_TOPIC for tp in tps
                       if topics is None or tp.topic in topics}
        elif group.state is S.EMPTY:
            refused = {}
        else:
            return Result(OffsetDeleteResponse(Errors.NON_EMPTY_GROUP))
        to_delete = [tp for tp in tps if tp not in refused]
        records = self.offsets.deletion_records(group_id, to_delete)

        def response(write_error: Errors | None) -> OffsetDeleteResponse:
            return OffsetDeleteResponse(Errors.NONE, tuple(
                PartitionResult(tp.topic, tp.partition, refused.get(tp, write_error or Errors.NONE))
                for tp in tps))

        if not records:
            return Result(response(None))
        pending = Pending(self._new_token(), "offset_delete", group_id)

        def on_done(error: Errors | None, log_offset: int, now: int, fx: Effects) -> None:
            if error is None:
                self.offsets.apply_delete(group_id, to_delete)
            fx.completed.append(Completion(pending.token, "offset_delete", group_id, "", response(error)))

        return Result(pending=pending, writes=[self._write(group_id, records, on_done)])


def _commit_error(error: Errors, offsets: list[PartitionCommit]) -> OffsetCommitResponse:
    return OffsetCommitResponse(error, tuple(PartitionResult(c.topic, c.partition, error) for c in offsets))
