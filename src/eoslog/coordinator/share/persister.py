"""How the rest of the broker reaches the share coordinator (Kafka's Persister): the group coordinator
initializes and deletes share-partition state, the share-partition manager (share/manager.py) reads and
writes it.

Contract
- One method per share partition and operation, each answering a :class:`ShareAnswer` (an error code,
  NONE when the state is durable, and the state for a read or a summary). Callers retry retriable
  errors (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS) as they see fit.
- :class:`LocalPersister` calls this broker's share coordinator in-process: a single node coordinates
  every ``__share_group_state`` partition itself.
- :class:`RoutingPersister` (Kafka's DefaultStatePersister with its PersisterStateManager) is what a
  broker uses: it finds the share partition's coordinator as FindCoordinator key type 2 does (the
  ``__share_group_state`` partition of ``group:topicId:partition``, its leader by this broker's view),
  calls the local one in-process when that is this broker (always, on a sole broker), and otherwise sends
  Kafka's RPC (keys 83-87) over the broker's shared connections (cluster/broker_clients.py). NOT_COORDINATOR,
  COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE and an unreachable broker are retried with an
  exponential backoff, looking the coordinator up again each time, for a bounded number of attempts (Kafka
  gives up after 5 lookups); then the last answer is returned and the caller's own retry takes over.
- Called on the broker's event loop only.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Protocol

from eoslog.cluster.broker_client import BrokerConnectionError
from eoslog.cluster.topics import SHARE_GROUP_STATE
from eoslog.coordinator.share.log_format import (
    NO_DELIVERY_COMPLETE_COUNT,
    PendingAckRange,
    PendingTransaction,
    SharePartitionKey,
    StateBatch,
)
from eoslog.coordinator.share.shard import ShareAnswer
from eoslog.coordinator.share.state import ShareGroupOffset
from eoslog.protocol import messages
from eoslog.protocol.errors import CoordinatorNotAvailableError, ErrorCode

if TYPE_CHECKING:
    from eoslog.cluster.broker_clients import BrokerClients
    from eoslog.coordinator.coordinators import Coordinators

log = logging.getLogger(__name__)


class Persister(Protocol):
    async def initialize_state(self, group_id: str, topic_id: uuid.UUID, partition: int, *, state_epoch: int,
                               start_offset: int) -> ShareAnswer: ...

    async def read_state(self, group_id: str, topic_id: uuid.UUID, partition: int, *,
                         leader_epoch: int) -> ShareAnswer: ...

    async def write_state(self, group_id: str, topic_id: uuid.UUID, partition: int, *, state_epoch: int,
                          leader_epoch: int, start_offset: int, state_batches: Iterable[StateBatch],
                          delivery_complete_count: int = NO_DELIVERY_COMPLETE_COUNT,
                          pending_transactions: Iterable[PendingTransaction] = ()) -> ShareAnswer: ...

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
                          state_batches, delivery_complete_count=NO_DELIVERY_COMPLETE_COUNT,
                          pending_transactions=()) -> ShareAnswer:
        return await self._call("write_state", group_id, topic_id, partition, state_epoch=state_epoch,
                                leader_epoch=leader_epoch, start_offset=start_offset, state_batches=state_batches,
                                delivery_complete_count=delivery_complete_count,
                                pending_transactions=tuple(pending_transactions))

    async def delete_state(self, group_id, topic_id, partition) -> ShareAnswer:
        return await self._call("delete_state", group_id, topic_id, partition)

    async def read_state_summary(self, group_id, topic_id, partition) -> ShareAnswer:
        return await self._call("read_state_summary", group_id, topic_id, partition)


# The share coordinator cannot answer for now, or another broker is it: look it up again and retry.
RETRIABLE = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                       ErrorCode.COORDINATOR_NOT_AVAILABLE})
# Kafka backs off from 1 s doubling to 30 s over 5 lookups; a share partition's leader holds a lock while it
# waits, so eoslog starts sooner and caps lower, and covers a coordinator move (a ZooKeeper session
# timeout, then the new leader's load) within its attempts.
REQUEST_BACKOFF_S = (0.1, 2.0)
MAX_ATTEMPTS = 10
REQUEST_TIMEOUT_S = 30.0
_KEYS = {"initialize_state": 83, "read_state": 84, "write_state": 85, "delete_state": 86,
         "read_state_summary": 87}
_VERSIONS = {"write_state": 1, "read_state_summary": 1}  # DeliveryCompleteCount (KIP-1226); the others v0


def broker_persister(node_id: int, coordinators: Callable[[], Coordinators], replicas,
                     clients: BrokerClients | None) -> RoutingPersister:
    """The persister of a broker: ``replicas`` (cluster/replica_manager.py) says who leads what."""
    from eoslog.protocol.coordinator_partition import partition_for

    def coordinator_of(key: str) -> int | None:
        try:
            coordinators().ensure_topic(SHARE_GROUP_STATE)  # asked of the controller on first use
        except CoordinatorNotAvailableError:
            return None
        index = partition_for(key, coordinators().partition_count(SHARE_GROUP_STATE))
        leader = replicas.leader_of(SHARE_GROUP_STATE, index)
        return None if leader < 0 else leader

    return RoutingPersister(node_id, LocalPersister(coordinators), coordinator_of, clients)


class RoutingPersister:
    def __init__(self, node_id: int, local: Persister, coordinator_of: Callable[[str], int | None],
                 clients: BrokerClients | None, *, backoff_s: tuple[float, float] = REQUEST_BACKOFF_S,
                 max_attempts: int = MAX_ATTEMPTS) -> None:
        """``coordinator_of(coordinator key)``: the broker leading that key's ``__share_group_state``
        partition by this broker's view, or None (no leader yet, the topic not created yet)."""
        self.node_id = node_id
        self.local = local
        self._coordinator_of = coordinator_of
        self._clients = clients
        self._backoff_s = backoff_s
        self._max_attempts = max_attempts
        self.remote_calls = 0  # RPCs answered by another broker's share coordinator (tests read it)

    async def _call(self, operation: str, group_id: str, topic_id: uuid.UUID, partition: int,
                    **fields) -> ShareAnswer:
        key = SharePartitionKey(group_id, topic_id, partition).coordinator_key()
        delay, attempt = self._backoff_s[0], 1
        while True:
            coordinator = self._coordinator_of(key)
            if coordinator == self.node_id:
                answer = await getattr(self.local, operation)(group_id, topic_id, partition, **fields)
            elif coordinator is None:
                answer = ShareAnswer(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"no share coordinator for {key} yet")
            else:
                answer = await self._send(coordinator, operation, group_id, topic_id, partition, fields)
            if answer.error not in RETRIABLE or attempt >= self._max_attempts:
                return answer
            log.debug("%s of %s: %s from broker %s, looking the share coordinator up again in %.2fs", operation,
                      key, answer.error.name, coordinator, delay)
            await asyncio.sleep(delay)
            delay, attempt = min(delay * 2, self._backoff_s[1]), attempt + 1

    async def _send(self, broker: int, operation: str, group_id: str, topic_id: uuid.UUID, partition: int,
                    fields: dict) -> ShareAnswer:
        client = self._clients.client_for(broker) if self._clients is not None else None
        if client is None:
            return ShareAnswer(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"broker {broker} has no inter-broker endpoint")
        request = _REQUESTS[operation](group_id, topic_id, partition, fields)
        try:
            response = await client.request(_KEYS[operation], _VERSIONS.get(operation, 0), request, REQUEST_TIMEOUT_S)
        except BrokerConnectionError as exc:
            return ShareAnswer(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"broker {broker} unreachable: {exc}")
        results = [p for r in response.results if r.topic_id == topic_id for p in r.partitions
                   if p.partition == partition]
        if len(results) != 1:
            return ShareAnswer(ErrorCode.UNKNOWN_SERVER_ERROR, f"broker {broker} answered for other partitions")
        self.remote_calls += 1
        return _ANSWERS.get(operation, _plain_answer)(results[0])

    async def initialize_state(self, group_id, topic_id, partition, *, state_epoch, start_offset) -> ShareAnswer:
        return await self._call("initialize_state", group_id, topic_id, partition, state_epoch=state_epoch,
                                start_offset=start_offset)

    async def read_state(self, group_id, topic_id, partition, *, leader_epoch) -> ShareAnswer:
        return await self._call("read_state", group_id, topic_id, partition, leader_epoch=leader_epoch)

    async def write_state(self, group_id, topic_id, partition, *, state_epoch, leader_epoch, start_offset,
                          state_batches, delivery_complete_count=NO_DELIVERY_COMPLETE_COUNT,
                          pending_transactions=()) -> ShareAnswer:
        return await self._call("write_state", group_id, topic_id, partition, state_epoch=state_epoch,
                                leader_epoch=leader_epoch, start_offset=start_offset,
                                state_batches=tuple(state_batches), delivery_complete_count=delivery_complete_count,
                                pending_transactions=tuple(pending_transactions))

    async def delete_state(self, group_id, topic_id, partition) -> ShareAnswer:
        return await self._call("delete_state", group_id, topic_id, partition)

    async def read_state_summary(self, group_id, topic_id, partition) -> ShareAnswer:
        return await self._call("read_state_summary", group_id, topic_id, partition)


# ---- the RPCs' requests and answers (one share partition each) ---------------------------------------------

def _initialize(group_id, topic_id, partition, f):
    m = messages.InitializeShareGroupStateRequest
    return m(group_id=group_id, topics=[m.InitializeStateData(topic_id=topic_id, partitions=[m.PartitionData(
        partition=partition, state_epoch=f["state_epoch"], start_offset=f["start_offset"])])])


def _read(group_id, topic_id, partition, f):
    m = messages.ReadShareGroupStateRequest
    return m(group_id=group_id, topics=[m.ReadStateData(topic_id=topic_id, partitions=[m.PartitionData(
        partition=partition, leader_epoch=f["leader_epoch"])])])


def _write(group_id, topic_id, partition, f):
    m = messages.WriteShareGroupStateRequest
    return m(group_id=group_id, topics=[m.WriteStateData(topic_id=topic_id, partitions=[m.PartitionData(
        partition=partition, state_epoch=f["state_epoch"], leader_epoch=f["leader_epoch"],
        start_offset=f["start_offset"], delivery_complete_count=f["delivery_complete_count"],
        state_batches=[m.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                    delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                       for b in f["state_batches"]],
        pending_transactions=pending_to_wire(m, f["pending_transactions"]))])])


def _delete(group_id, topic_id, partition, f):
    m = messages.DeleteShareGroupStateRequest
    return m(group_id=group_id, topics=[m.DeleteStateData(topic_id=topic_id, partitions=[m.PartitionData(
        partition=partition)])])


def _summary(group_id, topic_id, partition, f):
    m = messages.ReadShareGroupStateSummaryRequest
    # The leader epoch is the reader's; a summary is read by admin paths, which have none (Kafka sends 0).
    return m(group_id=group_id, topics=[m.ReadStateSummaryData(topic_id=topic_id, partitions=[m.PartitionData(
        partition=partition, leader_epoch=0)])])


_REQUESTS = {"initialize_state": _initialize, "read_state": _read, "write_state": _write,
             "delete_state": _delete, "read_state_summary": _summary}


def _plain_answer(result) -> ShareAnswer:
    return ShareAnswer(ErrorCode(result.error_code), result.error_message)


def _read_answer(result) -> ShareAnswer:
    if result.error_code:
        return _plain_answer(result)
    batches = tuple(StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                    for b in result.state_batches)
    return ShareAnswer(ErrorCode.NONE, None, ShareGroupOffset(
        snapshot_epoch=0, state_epoch=result.state_epoch, leader_epoch=-1, start_offset=result.start_offset,
        state_batches=batches, pending_transactions=pending_from_wire(result.pending_transactions)))


def _summary_answer(result) -> ShareAnswer:
    if result.error_code:
        return _plain_answer(result)
    return ShareAnswer(ErrorCode.NONE, None, ShareGroupOffset(
        snapshot_epoch=0, state_epoch=result.state_epoch, leader_epoch=result.leader_epoch,
        start_offset=result.start_offset, delivery_complete_count=result.delivery_complete_count))


_ANSWERS = {"read_state": _read_answer, "read_state_summary": _summary_answer}


# eoslog's tagged field (docs/share-groups.md, "Step 6"): the pending set rides on WriteShareGroupState's
# request and ReadShareGroupState's answer as it rides on the records; a Kafka peer skips it.

def pending_to_wire(message, pending) -> list:
    """``message``: the request or response class whose PendingTransaction struct to build."""
    Txn, Ack = message.PendingTransaction, message.PendingAck
    return [Txn(producer_id=t.producer_id, producer_epoch=t.producer_epoch, outcome=t.outcome,
                acks=[Ack(first_offset=a.first_offset, last_offset=a.last_offset,
                                     acknowledge_type=a.acknowledge_type) for a in t.acks])
            for t in pending]


def pending_from_wire(pending) -> tuple[PendingTransaction, ...]:
    return tuple(PendingTransaction(t.producer_id, t.producer_epoch,
                                    tuple(PendingAckRange(a.first_offset, a.last_offset, a.acknowledge_type)
                                          for a in t.acks), t.outcome)
                 for t in pending or ())
