"""The group coordinator: every classic group and committed offset one broker serves, without I/O.

``GroupCoordinator`` is what the API handlers call (JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
OffsetCommit, TxnOffsetCommit, OffsetFetch, OffsetDelete, DeleteGroups, DescribeGroups, ListGroups)
and what the transaction machinery calls when a marker lands on ``__consumer_offsets``
(:meth:`complete_txn`). Every method returns a :class:`~eoslog.coordinator.group.results.Result`
(see results.py for the pending / completion / write protocol). The entry points are split by
responsibility: membership, time, views and loading here; offsets in offset_apis.py; DeleteGroups
and offset retention in group_removal.py; consumer groups (KIP-848) in consumer_apis.py; share groups
(KIP-932) in share_apis.py -- mixins over this class's state and plumbing (``_check``, ``_write``,
``_finish``). A group id names one group of one type: ``groups`` (classic), ``consumer`` or ``share``.

Contract with the I/O layer (one event loop, no threads):
* Append every ``Write`` to ``__consumer_offsets``-``write.partition`` as one batch, in the order the
  writes were returned, and report each with :meth:`complete_write` in that same order. State
  changes only then, so completing writes out of order would apply them out of log order.
* Call :meth:`tick` when :meth:`next_deadline` passes, and :meth:`expire_offsets` periodically
  (Kafka: offsets.retention.check.interval.ms, 10 minutes).
* Before serving a partition, :meth:`load_partition` its records. Which partitions are served here
  (loaded, loading, led elsewhere) is the ``ownership`` callable's to say: the shard answers it from the
  coordinator runtime (coordinator/runtime.py).
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterable, Mapping

from eoslog.coordinator.group.config import GroupConfig
from eoslog.coordinator.group.consumer_apis import ConsumerGroupApis
from eoslog.coordinator.group.consumer_coordinator import ConsumerGroups
from eoslog.coordinator.group.consumer_log_format import Records, rebuild
from eoslog.coordinator.group.consumer_state import ConsumerGroupState as CS
from eoslog.coordinator.group.dynamic_configs import group_config_for
from eoslog.coordinator.group.errors import Errors, GroupCoordinatorError
from eoslog.coordinator.group.group import CONSUMER_PROTOCOL_TYPE, ClassicGroup, Effects, JoinGroupRequest
from eoslog.coordinator.group.group_removal import GroupRemoval
from eoslog.coordinator.group.log_format import (
    GroupMetadataKey,
    LogEntry,
    encode_group_metadata_key,
    encode_group_metadata_value,
    load,
    partition_for,
)
from eoslog.coordinator.group.member import Protocols
from eoslog.coordinator.group.offset_apis import OffsetApis
from eoslog.coordinator.group.offsets import NO_PRODUCER_ID, OffsetStore
from eoslog.coordinator.group.results import (
    GroupDescription,
    GroupListing,
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    MemberLeaveResult,
    Pending,
    Result,
    SyncGroupResponse,
    Write,
)
from eoslog.coordinator.group.share_apis import ShareGroupApis
from eoslog.coordinator.group.share_coordinator import ShareGroups
from eoslog.coordinator.group.share_log_format import Records as ShareRecords
from eoslog.coordinator.group.share_log_format import rebuild as rebuild_share_group
from eoslog.coordinator.group.share_offset_apis import ShareOffsetApis
from eoslog.coordinator.group.state import GroupState

S = GroupState
WriteCallback = Callable[[Errors | None, int, int, Effects], None]  # (error, log_offset, now_ms, fx)


def _default_member_id(client_id: str) -> str:
    return f"{client_id}-{uuid.uuid4()}"


class GroupCoordinator(OffsetApis, GroupRemoval, ConsumerGroupApis, ShareGroupApis, ShareOffsetApis):
    def __init__(self, config: GroupConfig | None = None, *,
                 member_id_factory: Callable[[str], str] = _default_member_id,
                 ownership: Callable[[int], Errors] | None = None, share_state: bool = False,
                 group_configs: Callable[[str], Mapping[str, str]] | None = None) -> None:
        """``share_state``: a share coordinator is wired (the broker), so share groups initialize the state
        of their share partitions before assigning them (share_initialization.py). ``group_configs``: a
        group's own configs (dynamic_configs.py; the GROUP config resource), over ``config``."""
        self.config = config or GroupConfig()
        # Whether this broker serves a __consumer_offsets partition's groups now: NONE, or the error its
        # groups answer (NOT_COORDINATOR: look again; COORDINATOR_LOAD_IN_PROGRESS: retry here). Every
        # partition is served when none is given (a coordinator on its own, as the unit tests build it).
        self._ownership = ownership or (lambda partition: Errors.NONE)
        self.groups: dict[str, ClassicGroup] = {}
        # KIP-848 groups; a group id is in at most one of the two dictionaries.
        self.consumer = ConsumerGroups(self.config)
        # Per consumer group, its records as last appended (diffed against for the next write) and as
        # last made durable (what a failed write rolls the group back to).
        self._consumer_written: dict[str, Records] = {}
        self._consumer_durable: dict[str, Records] = {}
        # KIP-932 share groups, and their records as last appended and as last made durable.
        self.share = ShareGroups(self.config, initialize_state=share_state)
        self._group_configs = group_configs or (lambda group_id: {})
        self.consumer.config_for = self.share.config_for = self.config_for
        self._share_written: dict[str, ShareRecords] = {}
        self._share_durable: dict[str, ShareRecords] = {}
        self.share_initializations = []
        self.offsets = OffsetStore()
        self._member_id_factory = member_id_factory
        self._tokens = itertools.count(1)
        self._write_ids = itertools.count(1)
        self._writes_in_flight: dict[int, WriteCallback] = {}

    # ------------------------------------------------------------------------------------------------
    # Plumbing

    def config_for(self, group_id: str) -> GroupConfig:
        """The settings of one group: the broker's, with the group's own configs over them."""
        return group_config_for(self.config, self._group_configs(group_id))

    def group_config_changed(self, group_id: str) -> None:
        """A group's configs changed: the live group uses them from its next heartbeat on."""
        for groups in (self.consumer.groups, self.share.groups):
            group = groups.get(group_id)
            if group is not None:
                group.config = self.config_for(group_id)

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    def _new_token(self) -> int:
        return next(self._tokens)

    def _check(self, group_id: str, *, allow_empty_id: bool = False) -> Errors:
        if not group_id and not allow_empty_id:
            return Errors.INVALID_GROUP_ID
        return self._ownership(self.partition_for(group_id))

    def _get_or_create(self, group_id: str, now_ms: int) -> ClassicGroup:
        group = self.groups.get(group_id)
        if group is None:
            group = ClassicGroup(group_id, self.config, now_ms, new_token=self._new_token,
                                 new_member_id=self._member_id_factory)
            self.groups[group_id] = group
        return group

    def _write(self, group_id: str, records: tuple[tuple[bytes, bytes | None], ...], callback: WriteCallback,
               *, producer_id: int = NO_PRODUCER_ID, producer_epoch: int = -1) -> Write:
        write_id = next(self._write_ids)
        self._writes_in_flight[write_id] = callback
        return Write(write_id, self.partition_for(group_id), records, producer_id, producer_epoch,
                     producer_id != NO_PRODUCER_ID)

    def _finish(self, fx: Effects, result: Result) -> Result:
        for store in fx.stores:
            record = (encode_group_metadata_key(GroupMetadataKey(store.group_id)),
                      encode_group_metadata_value(store.value))
            on_done = store.on_done
            result.writes.append(self._write(
                store.group_id, (record,),
                lambda error, log_offset, now_ms, fx2, on_done=on_done: on_done(error, now_ms, fx2)))
        result.completed.extend(fx.completed)
        if result.pending is not None:
            # The call's own answer may already be known (a lone member completing the barrier).
            for i, completion in enumerate(result.completed):
                if completion.token == result.pending.token:
                    result.response = completion.response
                    result.pending = None
                    del result.completed[i]
                    break
        return result

    @staticmethod
    def _answer(answer: object) -> Result:
        if isinstance(answer, Pending):
            return Result(pending=answer)
        return Result(response=answer)

    def complete_write(self, write_id: int, *, now_ms: int, error: Errors | None = None,
                       log_offset: int = -1) -> Result:
        """A write returned earlier was appended (``error`` None, first record at ``log_offset``) or
        failed. Give a coordinator-level error (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, ...)."""
        try:
            callback = self._writes_in_flight.pop(write_id)
        except KeyError:
            raise GroupCoordinatorError(f"no write {write_id} in flight") from None
        fx = Effects()
        callback(None if error is Errors.NONE else error, log_offset, now_ms, fx)
        return self._finish(fx, Result())

    # ------------------------------------------------------------------------------------------------
    # Membership

    def join_group(self, group_id: str, member_id: str, *, protocol_type: str, protocols: Protocols,
                   session_timeout_ms: int, rebalance_timeout_ms: int = -1,
                   group_instance_id: str | None = None, client_id: str = "", client_host: str = "",
                   require_known_member_id: bool = True, supports_skip_assignment: bool = False,
                   topics: dict[str, int] | None = None, now_ms: int) -> Result:
        """``topics`` (non-internal topics and their partition counts) serve a classic member joining a
        consumer group, whose assignment the coordinator computes."""
        error = self._check(group_id)
        if error is Errors.NONE and not (self.config.min_session_timeout_ms <= session_timeout_ms
                                         <= self.config.max_session_timeout_ms):
            error = Errors.INVALID_SESSION_TIMEOUT
        if error is Errors.NONE and group_id in self.share.groups:
            error = Errors.INCONSISTENT_GROUP_PROTOCOL  # Kafka: a share group is joined with its own API
        group = self.groups.get(group_id)
        downgrading = False
        consumer_group = self.consumer.groups.get(group_id)
        if error is Errors.NONE and consumer_group is not None:
            if consumer_group.is_empty() and consumer_group.state is not CS.DEAD:
                # The last consumer-protocol member left: the group becomes a classic one (Kafka 4.0's
                # downgrade), its offsets stay, its consumer records get tombstones.
                downgrading = True
            elif protocol_type == CONSUMER_PROTOCOL_TYPE and error is Errors.NONE:
                # A classic member of a consumer group (Kafka 4.0's mixed groups): answered at once.
                return self._classic_join_consumer_group(
                    group_id, member_id, protocols=protocols, session_timeout_ms=session_timeout_ms,
                    rebalance_timeout_ms=session_timeout_ms if rebalance_timeout_ms < 0 else rebalance_timeout_ms,
                    group_instance_id=group_instance_id, client_id=client_id, client_host=client_host,
                    topics=topics, now_ms=now_ms, require_known_member_id=require_known_member_id)
            else:
                error = Errors.INCONSISTENT_GROUP_PROTOCOL
        if error is Errors.NONE and group is None and member_id:
            error = Errors.UNKNOWN_MEMBER_ID
        if error is not Errors.NONE:
            return Result(JoinGroupResponse(error, member_id=member_id))
        downgrade = None
        if downgrading:
            del self.consumer.groups[group_id]
            downgrade = self._persist_consumer_group(group_id)
        group = self._get_or_create(group_id, now_ms)
        request = JoinGroupRequest(
            member_id, group_instance_id, client_id, client_host, session_timeout_ms,
            session_timeout_ms if rebalance_timeout_ms < 0 else rebalance_timeout_ms,  # v0 has none
            protocol_type, tuple((name, bytes(metadata)) for name, metadata in protocols),
            require_known_member_id, supports_skip_assignment)
        fx = Effects()
        result = self._answer(group.join_group(request, now_ms, fx))
        self._drop_if_unused(group)
        if downgrade is not None:
            result.writes.insert(0, downgrade)  # before any classic record of the group
        return self._finish(fx, result)

    def sync_group(self, group_id: str, member_id: str, generation_id: int,
                   assignments: dict[str, bytes] | Iterable[tuple[str, bytes]] = (), *,
                   group_instance_id: str | None = None, protocol_type: str | None = None,
                   protocol_name: str | None = None, now_ms: int) -> Result:
        error = self._check(group_id)
        if error is Errors.NONE and group_id in self.consumer.groups:
            return self._classic_sync_consumer_group(group_id, member_id, generation_id, now_ms)
        group = self.groups.get(group_id)
        if error is Errors.NONE and group is None:
            error = Errors.UNKNOWN_MEMBER_ID
        if error is not Errors.NONE:
            return Result(SyncGroupResponse(error))
        assert group is not None
        fx = Effects()
        answer = group.sync_group(member_id, generation_id, group_instance_id, protocol_type, protocol_name,
                                  dict(assignments), now_ms, fx)
        return self._finish(fx, self._answer(answer))

    def heartbeat(self, group_id: str, member_id: str, generation_id: int, *,
                  group_instance_id: str | None = None, now_ms: int) -> Result:
        error = self._check(group_id)
        if error is Errors.NONE and group_id in self.consumer.groups:
            return self._classic_heartbeat_consumer_group(group_id, member_id, generation_id, now_ms)
        group = self.groups.get(group_id)
        if error is Errors.NONE and group is None:
            error = Errors.UNKNOWN_MEMBER_ID
        if error is not Errors.NONE:
            return Result(HeartbeatResponse(error))
        assert group is not None
        return Result(group.heartbeat(member_id, generation_id, group_instance_id, now_ms))

    def leave_group(self, group_id: str, members: Iterable[tuple[str, str | None]], *,
                    now_ms: int) -> Result:
        members = list(members)
        error = self._check(group_id)
        if error is not Errors.NONE:
            return Result(LeaveGroupResponse(error))
        if group_id in self.consumer.groups:
            return self._classic_leave_consumer_group(group_id, members, now_ms)
        group = self.groups.get(group_id)
        if group is None:
            return Result(LeaveGroupResponse(Errors.NONE, tuple(
                MemberLeaveResult(m, i, Errors.UNKNOWN_MEMBER_ID) for m, i in members)))
        fx = Effects()
        return self._finish(fx, Result(group.leave_group(members, now_ms, fx)))

    def _drop_if_unused(self, group: ClassicGroup) -> None:
        # A group created by a refused first JoinGroup holds nothing worth keeping.
        if group.state is S.EMPTY and group.is_empty() and group.generation_id == 0 \
                and not self.offsets.groups().intersection((group.group_id,)):
            self.groups.pop(group.group_id, None)

    # ------------------------------------------------------------------------------------------------
    # Time

    def tick(self, now_ms: int) -> Result:
        fx = Effects()
        for group in list(self.groups.values()):
            deadline = group.next_deadline()
            if deadline is not None and deadline <= now_ms:
                group.tick(now_ms, fx)
        result = Result()
        for group_id in self.consumer.tick(now_ms):
            write = self._persist_consumer_group(group_id)
            if write is not None:
                result.writes.append(write)
            downgrade = self._maybe_downgrade(group_id, now_ms)
            if downgrade is not None:
                result.extend(downgrade)
        self._share_tick(now_ms, result)
        return self._finish(fx, result)

    def next_deadline(self) -> int | None:
        classic = min((d for d in (g.next_deadline() for g in self.groups.values()) if d is not None),
                      default=None)
        deadlines = (classic, self.consumer.next_deadline(), self.share.next_deadline())
        return min((d for d in deadlines if d is not None), default=None)

    # ------------------------------------------------------------------------------------------------
    # Views

    def describe(self, group_id: str) -> GroupDescription:
        error = self._check(group_id, allow_empty_id=True)
        group = self.groups.get(group_id)
        if error is Errors.NONE and (group_id in self.consumer.groups or group_id in self.share.groups):
            # Kafka 4.x: DescribeGroups describes classic groups only; Consumer/ShareGroupDescribe the others.
            return GroupDescription(group_id, Errors.GROUP_ID_NOT_FOUND, S.DEAD.kafka_name, "", "")
        if error is not Errors.NONE or group is None:
            return GroupDescription(group_id, error, S.DEAD.kafka_name, "", "")
        return group.describe()

    def list_groups(self, states: Iterable[str] | None = None,
                    types: Iterable[str] | None = None) -> list[GroupListing]:
        """ListGroups; ``states`` (v4+) and ``types`` (v5+) filter, case-insensitively like Kafka."""
        wanted_states = None if not states else {s.lower() for s in states}
        wanted_types = None if not types else {t.lower() for t in types}
        out = []
        for group_id, group in sorted(self.groups.items()):
            if group.state is S.DEAD:
                continue
            if wanted_states is not None and group.state.kafka_name.lower() not in wanted_states:
                continue
            # "types" filters on the group type (classic, consumer), not on the protocol type.
            if wanted_types is not None and "classic" not in wanted_types:
                continue
            out.append(GroupListing(group_id, group.protocol_type or "", group.state.kafka_name))
        for group_id, cgroup in self.consumer.groups.items():
            if cgroup.state.kafka_name == "Dead":
                continue
            if wanted_states is not None and cgroup.state.kafka_name.lower() not in wanted_states:
                continue
            if wanted_types is not None and "consumer" not in wanted_types:
                continue
            out.append(GroupListing(group_id, CONSUMER_PROTOCOL_TYPE, cgroup.state.kafka_name, "consumer"))
        for group_id, sgroup in self.share.groups.items():
            state = sgroup.state.kafka_name
            if state == "Dead" or wanted_states is not None and state.lower() not in wanted_states:
                continue
            if wanted_types is not None and "share" not in wanted_types:
                continue
            out.append(GroupListing(group_id, "share", state, "share"))  # protocol type and type: "share"
        return sorted(out, key=lambda g: g.group_id)

    # ------------------------------------------------------------------------------------------------
    # Loading

    def unload_partition(self, partition: int) -> Result:
        """This broker no longer leads ``partition``: forget its groups and offsets (the new leader
        loads them from the replicated log); their requests answer NOT_COORDINATOR from now on, and so
        do the JoinGroup and SyncGroup calls still waiting in them."""
        group_ids = [g for g in set(self.groups) | self.offsets.groups() if self.partition_for(g) == partition]
        group_ids += [g for g in set(self.consumer.groups) | set(self.share.groups)
                      if self.partition_for(g) == partition and g not in group_ids]
        fx = Effects()
        for group_id in group_ids:
            group = self.groups.pop(group_id, None)
            if group is not None:
                group.unload(fx)
            self.consumer.groups.pop(group_id, None)
            self._consumer_written.pop(group_id, None)
            self._consumer_durable.pop(group_id, None)
            # Nothing of a share group waits but its writes, which the runtime fails: they answer then.
            self.share.groups.pop(group_id, None)
            self._share_written.pop(group_id, None)
            self._share_durable.pop(group_id, None)
        self.offsets.unload(group_ids)
        return self._finish(fx, Result())

    def load_partition(self, partition: int, entries: Iterable[LogEntry], *, now_ms: int) -> None:
        """Rebuild the groups and offsets of one ``__consumer_offsets`` partition from its records."""
        loaded = load(entries)
        for group_id, value in loaded.groups.items():
            self.groups[group_id] = ClassicGroup.from_record(
                group_id, value, self.config, now_ms, new_token=self._new_token,
                new_member_id=self._member_id_factory)
        for group_id, records in loaded.consumer_groups.items():
            self.consumer.groups[group_id] = rebuild(group_id, records, self.config_for(group_id), now_ms)
            self._consumer_written[group_id] = self._consumer_durable[group_id] = records
        for group_id, share_records in loaded.share_groups.items():
            self.share.groups[group_id] = self.share.adopt(
                rebuild_share_group(group_id, share_records, self.config_for(group_id), now_ms))
            self._share_written[group_id] = self._share_durable[group_id] = share_records
        self.offsets.load(loaded)
        for group_id in self.offsets.groups():
            if self.partition_for(group_id) == partition and group_id not in self.consumer.groups \
                    and group_id not in self.share.groups:
                self._get_or_create(group_id, now_ms)  # a group known only by its offsets

    def groups_in(self, partition: int) -> int:
        return sum(1 for g in set(self.groups) | set(self.consumer.groups) | set(self.share.groups)
                   if self.partition_for(g) == partition)
