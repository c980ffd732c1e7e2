"""Fetch (key 1): long poll with max wait / min bytes, per-partition and total byte limits.

Log data leaves as file regions (never decoded, never copied by the encoder). read_committed stops at
the last stable offset and returns the aborted transactions in the range. We answer every request as a
full fetch and never create fetch sessions (session id 0), which KIP-227 allows.

v13+ name topics by topic id (KIP-516): ids are resolved to names on arrival, an unknown id is answered
UNKNOWN_TOPIC_ID for its partitions, and the response names topics by the ids asked for. v15+ carry the
follower's id in ReplicaState, with its broker epoch (KIP-903: a follower that restarted since it was
caught up leaves the ISR, cluster/isr.py). v16+ refused partitions name their current leader (KIP-951,
api/_leader_hints.py). v17 and v18 add only tagged request fields for KRaft followers (a replica's
directory id, its high watermark), which consumers never set and we do not need.

v0-v3, which Kafka 4.0 dropped (KIP-896), are served as Kafka 3.9 served them, for clients that still
send them (docs/clients.md): the records are converted down to the client's message format
(records/legacy.py), so those answers are read and copied, not sent from the files.
"""

from __future__ import annotations

import asyncio
import functools
import time
from typing import TYPE_CHECKING

from eoslog.api import _leader_hints as leader_hints
from eoslog.cluster.partition import READ_COMMITTED
from eoslog.protocol import RecordsList, specialised
from eoslog.protocol.error_mapping import error_code_for
from eoslog.protocol.errors import (
    ErrorCode,
    TopicAuthorizationFailedError,
    UnknownTopicIdError,
)
from eoslog.protocol.messages import FetchResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import FetchRequest

API_KEY = 1
MIN_VERSION = 0
MAX_VERSION = 18

TopicResponse = FetchResponse.FetchableTopicResponse
PartitionData = FetchResponse.PartitionData
AbortedTransaction = FetchResponse.AbortedTransaction
CONSUMER_REPLICA_ID = -1
# The tagged fields of PartitionData when there is nothing to say: the codec's own default objects
# (protocol/specialised.py writes an empty section for them without comparing), one shared value each
# instead of three fresh objects per partition per Fetch (20 per consumer fetch with 1,000 partitions
# over 50 consumers, where they were a tenth of the broker's loop).
_UNUSED_TAGGED = {
    "diverging_epoch": specialised.NO_DIVERGING_EPOCH,
    "current_leader": specialised.NO_CURRENT_LEADER,
    "snapshot_id": specialised.NO_SNAPSHOT_ID,
}


def _error_partition(index: int, code: int) -> PartitionData:
    return PartitionData(partition_index=index, error_code=code, high_watermark=-1, last_stable_offset=-1,
                         log_start_offset=-1, aborted_transactions=None, preferred_read_replica=-1, records=b"",
                         **_UNUSED_TAGGED)


def _read_all(services, request, denied=frozenset()):
    """One pass over every requested partition; returns (responses, bytes read, any error, and the
    (partition, bytes) read, which :func:`_count_out` counts once this pass is the one answered)."""
    isolation = request.isolation_level
    replicas = services.replicas
    follower = request.replica_id >= 0
    # KIP-903's ReplicaEpoch (v15+; the default -1 before, and from KRaft-less senders that leave it out).
    broker_epoch = request.replica_state.replica_epoch if request.replica_state is not None else -1
    remaining = request.max_bytes if request.max_bytes > 0 else 0x7FFFFFFF
    total = 0
    errors = False
    responses = []
    reads = []
    for topic in request.topics:
        partitions = []
        responses.append(TopicResponse(topic=topic.topic, topic_id=topic.topic_id, partitions=partitions))
        for wanted in topic.partitions:
            try:
                if topic.topic is None:
                    raise UnknownTopicIdError(f"no topic has the id {topic.topic_id}")
                if topic.topic in denied:
                    raise TopicAuthorizationFailedError(f"may not READ {topic.topic}")
                limit = min(wanted.partition_max_bytes, remaining)
                if follower:
                    partition = replicas.follower_fetch(request.replica_id, topic.topic, wanted.partition,
                                                        wanted.fetch_offset, wanted.current_leader_epoch,
                                                        broker_epoch)
                    result = partition.read_for_replica(wanted.fetch_offset, limit)
                else:
                    partition = replicas.leader_partition(topic.topic, wanted.partition,
                                                          getattr(wanted, "current_leader_epoch", -1))
                    # KIP-74: the first partition with data returns at least one whole batch, however big.
                    result = partition.read(wanted.fetch_offset, limit, isolation, min_one_batch=(total == 0))
            except Exception as exc:  # noqa: BLE001 - mapped in one place
                code = error_code_for(exc)
                errors = True
                entry = _error_partition(wanted.partition, int(code))
                if code == ErrorCode.OFFSET_OUT_OF_RANGE and (topic.topic, wanted.partition) in services.registry.partitions:
                    p = services.registry.partitions[(topic.topic, wanted.partition)]
                    entry.high_watermark = p.high_watermark
                    entry.last_stable_offset = p.last_stable_offset
                    entry.log_start_offset = p.log_start_offset
                partitions.append(entry)
                continue
            size = result.size
            total += size
            if size:
                reads.append((partition, size))
            remaining = max(remaining - size, 0)
            aborted = None
            if isolation == READ_COMMITTED:
                aborted = [
                    AbortedTransaction(producer_id=producer_id, first_offset=first_offset)
                    for producer_id, first_offset in partition.aborted_transactions(wanted.fetch_offset, result)
                ]
            partitions.append(PartitionData(
                partition_index=wanted.partition, error_code=0, high_watermark=partition.high_watermark,
                last_stable_offset=partition.last_stable_offset, log_start_offset=partition.log_start_offset,
                aborted_transactions=aborted, preferred_read_replica=-1,
                records=RecordsList(result.regions) if size else b"", **_UNUSED_TAGGED,
            ))
    return responses, total, errors, reads


def _count_out(request, reads) -> None:
    """Bytes out per partition (metrics: BytesOutPerSec for consumers, ReplicationBytesOutPerSec for
    followers), counted for the pass that is answered, not for the ones a long poll threw away."""
    if request.replica_id >= 0:
        for partition, size in reads:
            partition.replication_bytes_out += size
    else:
        for partition, size in reads:
            partition.bytes_out += size


def _resolve_topic_ids(services, request) -> None:
    """v13+: the name of each topic id asked for, into the request (None for an unknown id)."""
    by_id = services.registry.topics.by_id
    for topic in request.topics:
        info = by_id.get(topic.topic_id)
        topic.topic = info.name if info is not None else None


def handle(context: RequestContext, request: FetchRequest):
    services = context.services
    if context.api_version >= 13:
        _resolve_topic_ids(services, request)
    if context.api_version >= 15:
        request.replica_id = request.replica_state.replica_id  # KIP-903 moved it into ReplicaState
    if request.replica_id != CONSUMER_REPLICA_ID:
        services.replicas.check_follower(request.replica_id)  # a single node has none: NOT_LEADER_OR_FOLLOWER
    denied = frozenset()
    respond = functools.partial(_respond, context)
    if request.replica_id >= 0:
        # A follower's fetch is the cluster's own traffic (docs/security.md: brokers are super users).
        context.require(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER)
    elif services.authorizer.keeps_acls:  # without ACLs every topic may be read: nothing to compute
        names = {t.topic for t in request.topics if t.topic is not None}
        denied = frozenset(names - context.authorized_names(AclOperation.READ, ResourceType.TOPIC, names))
    responses, total, errors, reads = _read_all(services, request, denied)
    if errors or total >= max(request.min_bytes, 1) or request.max_wait_ms <= 0:
        _count_out(request, reads)
        return respond(responses)
    return _long_poll(services, request, denied, respond)


async def _long_poll(services, request, denied, respond):
    loop = asyncio.get_running_loop()
    deadline = time.monotonic() + request.max_wait_ms / 1000
    while True:
        waiter = loop.create_future()
        partitions = []
        # A follower waits for new data (it moves the high watermark); a consumer for the high watermark.
        follower = request.replica_id >= 0
        for topic in request.topics:
            for wanted in topic.partitions:
                partition = services.registry.partitions.get((topic.topic, wanted.partition))
                if partition is not None:
                    if follower:
                        partition.add_replica_fetch_waiter(waiter)
                    else:
                        partition.add_fetch_waiter(waiter)
                    partitions.append(partition)
        try:
            await asyncio.wait_for(waiter, max(deadline - time.monotonic(), 0))
        except TimeoutError:
            pass
        finally:
            for partition in partitions:
                partition.remove_fetch_waiter(waiter)
                partition.remove_replica_fetch_waiter(waiter)
        responses, total, errors, reads = _read_all(services, request, denied)
        if errors or total >= max(request.min_bytes, 1) or time.monotonic() >= deadline:
            _count_out(request, reads)
            return respond(responses)


def _respond(context, responses):
    if context.api_version < OLDEST_V2_FETCH:
        _down_convert(responses, magic=0 if context.api_version < 2 else 1)
    return leader_hints.add_to_fetch(context, _response(responses))


OLDEST_V2_FETCH = 4  # Fetch v4 (Kafka 0.11) is the first that reads v2 batches


def _down_convert(responses, magic: int) -> None:
    """Fetch v0-v3: each partition's records as messages of the client's format (records/legacy.py). Read
    now, on the loop, while the file regions are still the partition's."""
    import os

    from eoslog.log.region import FileRegion
    from eoslog.records.legacy import down_convert

    for topic in responses:
        for partition in topic.partitions:
            if not partition.records:
                continue
            data = b"".join(os.pread(piece.fd, piece.length, piece.position) if isinstance(piece, FileRegion)
                            else bytes(piece) for piece in partition.records)
            partition.records = down_convert(data, magic)


def _response(responses):
    return FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=responses)


def error_response(context: RequestContext, request: FetchRequest, code: ErrorCode):
    return _response([
        TopicResponse(topic=t.topic, topic_id=t.topic_id,
                      partitions=[_error_partition(p.partition, int(code)) for p in t.partitions])
        for t in request.topics
    ])
