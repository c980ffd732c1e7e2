"""ListOffsets (key 2): earliest, latest, by timestamp, max timestamp; read_committed sees up to the LSO.

v8-v10 add specs for tiered storage (KIP-405, KIP-1005, KIP-1075), answered as Kafka 4.x answers them
for a topic without remote storage -- which every eoslog topic is: earliest-local (-4) is the log
start offset, as earliest; latest-tiered (-5) is "nothing tiered", offset -1 with leader epoch -1;
v10's TimeoutMs bounds remote lookups, and we do none. v11's earliest-pending-upload (-6, KIP-1023)
is not advertised.

v0, which Kafka 4.0 dropped (KIP-896), is served as Kafka 3.9 served it, since Go's Sarama sends it
whatever version it is configured for (docs/clients.md): a list of up to MaxNumOffsets offsets, the
newest first, taken from segment boundaries by their files' modification times (``legacy_offsets``).
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

from eoslog.protocol.error_mapping import error_code_for
from eoslog.protocol.errors import TopicAuthorizationFailedError
from eoslog.protocol.messages import ListOffsetsResponse
from eoslog.records.batch import decode_batch
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import ListOffsetsRequest

API_KEY = 2
MIN_VERSION = 0
MAX_VERSION = 10

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5

TopicResponse = ListOffsetsResponse.ListOffsetsTopicResponse
PartitionResponse = ListOffsetsResponse.ListOffsetsPartitionResponse


def _records_of_batch_at(partition, offset: int):
    """Decodes the one batch holding ``offset``: Kafka answers by-time lookups per record, not per batch."""
    result = partition.log.read(offset, 1, min_one_batch=True)
    data = b"".join(os.pread(r.fd, r.length, r.position) for r in result.regions)
    return decode_batch(data, 0).absolute_records() if data else []


def lookup(partition, timestamp: int, isolation_level: int) -> tuple[int, int]:
    """(timestamp, offset) Kafka answers for one partition; (-1, -1) when no record qualifies."""
    upper = partition.fetch_upper_bound(isolation_level)
    if timestamp == LATEST:
        return -1, upper
    if timestamp == LATEST_TIERED:
        return -1, -1
    if timestamp in (EARLIEST, EARLIEST_LOCAL):  # all of a log is local
        return -1, partition.log_start_offset
    if timestamp == MAX_TIMESTAMP:
        found = partition.log.max_timestamp_and_offset()
        if found is None or found.offset >= upper:
            return -1, -1
        for record in _records_of_batch_at(partition, found.offset):
            if record.timestamp == found.timestamp:
                return record.timestamp, record.offset
        return found.timestamp, found.offset
    found = partition.log.offset_for_timestamp(timestamp)
    if found is None:
        return -1, -1
    for record in _records_of_batch_at(partition, found.offset):
        if record.timestamp >= timestamp and record.offset >= partition.log_start_offset:
            if record.offset >= upper:
                return -1, -1
            return record.timestamp, record.offset
    return -1, -1


def legacy_offsets(segments: list[tuple[int, int, int]], log_start: int, log_end: int, high_watermark: int,
                   timestamp: int, max_offsets: int, now_ms: int) -> list[int]:
    """ListOffsets v0's answer (Kafka 3.9's legacyFetchOffsetsBefore, for a consumer): ``segments`` are
    (base offset, size in bytes, file modification time in ms), oldest first. The candidates are each
    segment's base (no lower than the log start) stamped with its file's time, and the log end, stamped
    now, when the active segment holds data; latest starts from the newest, earliest from the oldest,
    another time from the newest stamped no later than it. Up to ``max_offsets`` are given, newest first,
    none past the high watermark (which takes the place of those that were)."""
    candidates = [(max(base, log_start), modified) for base, _, modified in segments]
    if segments and segments[-1][1] > 0:
        candidates.append((log_end, now_ms))
    if timestamp == LATEST:
        start = len(candidates) - 1
    elif timestamp == EARLIEST:
        start = 0
    else:
        start = len(candidates) - 1
        while start >= 0 and candidates[start][1] > timestamp:
            start -= 1
    count = max(0, min(max_offsets, start + 1))
    offsets = sorted((candidates[start - j][0] for j in range(count)), reverse=True)
    if any(offset > high_watermark for offset in offsets):
        offsets = [high_watermark, *(offset for offset in offsets if offset <= high_watermark)]
    return offsets


def _legacy_lookup(partition, timestamp: int, max_offsets: int) -> list[int]:
    segments = [(s.base_offset, s.size, int(os.fstat(s.fd).st_mtime * 1000)) for s in partition.log.segments]
    return legacy_offsets(segments, partition.log_start_offset, partition.log_end_offset,
                          partition.high_watermark, timestamp, max_offsets, int(time.time() * 1000))


def handle(context: RequestContext, request: ListOffsetsRequest):
    services = context.services
    isolation = request.isolation_level if context.api_version >= 2 else 0
    topics = []
    described = context.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, {t.name for t in request.topics})
    for topic in request.topics:
        partitions = []
        topics.append(TopicResponse(name=topic.name, partitions=partitions))
        for wanted in topic.partitions:
            try:
                if topic.name not in described:
                    raise TopicAuthorizationFailedError(f"may not DESCRIBE {topic.name}")
                partition = services.replicas.leader_partition(topic.name, wanted.partition_index)
                if context.api_version == 0:
                    old_style = _legacy_lookup(partition, wanted.timestamp, wanted.max_num_offsets)
                    partitions.append(PartitionResponse(partition_index=wanted.partition_index, error_code=0,
                                                        old_style_offsets=old_style))
                    continue
                timestamp, offset = lookup(partition, wanted.timestamp, isolation)
                code = 0
                epoch = partition.leader_epoch if partition.leader_epoch is not None else 0
                if offset == -1:
                    epoch = -1  # nothing found (max timestamp of an empty log, latest tiered): no epoch, as Kafka
            except Exception as exc:  # noqa: BLE001
                code, timestamp, offset, epoch = int(error_code_for(exc)), -1, -1, -1
            partitions.append(PartitionResponse(partition_index=wanted.partition_index, error_code=code,
                                                old_style_offsets=[], timestamp=timestamp, offset=offset,
                                                leader_epoch=epoch))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)
