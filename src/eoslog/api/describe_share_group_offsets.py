"""DescribeShareGroupOffsets (key 90), v0-1 (KIP-932; v1 adds the lag, KIP-1226): each share partition's
start offset and leader epoch as the share coordinator holds them (ReadShareGroupStateSummary), and its
lag: the partition's high watermark less the start offset less the records done above it.

As Kafka's KafkaApis and GroupCoordinatorService: DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED
for the group); a requested topic the caller may not DESCRIBE answers TOPIC_AUTHORIZATION_FAILED on its
partitions, and with no topics given (every initialized share partition of the group) such topics are
left out. A topic the cluster does not have answers start offset -1 (no data, not an error), as does a
partition the share coordinator has no state of or could not answer for. The lag needs the partition's
high watermark: from the replica where this broker leads it, otherwise from its leader with ListOffsets
(cluster/partition_offsets.py, Kafka's PartitionMetadataClient). It is -1 when unknown: no start offset,
no count of done records, or no high watermark (no leader, or the leader could not be asked)."""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING

from eoslog.api._group_common import code, group_coordinator
from eoslog.coordinator.share.log_format import NO_DELIVERY_COMPLETE_COUNT, NO_START_OFFSET
from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import DescribeShareGroupOffsetsResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import DescribeShareGroupOffsetsRequest

API_KEY = 90
MIN_VERSION = 0
MAX_VERSION = 1

Group = DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponseGroup
Topic = DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponseTopic
Partition = DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponsePartition
NO_LAG = -1
ZERO_UUID = uuid.UUID(int=0)


def handle(context: RequestContext, request: DescribeShareGroupOffsetsRequest):
    return _describe_all(context, request)


async def _describe_all(context: RequestContext, request: DescribeShareGroupOffsetsRequest):
    groups = [await _describe(context, g) for g in request.groups]
    return DescribeShareGroupOffsetsResponse(throttle_time_ms=0, groups=groups)


async def _describe(context: RequestContext, group) -> Group:
    group_id = group.group_id
    if not context.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return _refused(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    topics = context.services.registry.topics.topics
    if group.topics is None:
        error, held = group_coordinator(context).core.share_group_initialized_partitions(group_id)
        if error.value != "NONE":
            return _refused(group_id, ErrorCode(code(error)))
        by_id = {info.topic_id: name for name, info in topics.items()}
        asked = {by_id[t]: sorted(ps) for t, ps in held.items() if t in by_id}
        allowed = context.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, asked)
        asked = {name: ps for name, ps in sorted(asked.items()) if name in allowed}
        refused = {}
    else:
        error, _ = group_coordinator(context).core.share_group_initialized_partitions(group_id)
        if error.value != "NONE":
            return _refused(group_id, ErrorCode(code(error)))
        wanted = {t.topic_name: list(t.partitions) for t in group.topics}
        allowed = context.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, wanted)
        asked = {name: ps for name, ps in wanted.items() if name in allowed}
        refused = {name: ps for name, ps in wanted.items() if name not in allowed}
    # the group coordinator's persister: in-process where the share coordinator is this broker, keys
    # 83-87 to the broker that is otherwise (coordinator/share/persister.py RoutingPersister)
    persister = group_coordinator(context).persister
    out = []
    for name, partitions in asked.items():
        info = topics.get(name)
        if info is None:
            out.append(Topic(topic_name=name, topic_id=ZERO_UUID, partitions=[
                Partition(partition_index=p, start_offset=NO_START_OFFSET, leader_epoch=0, lag=NO_LAG,
                          error_code=0, error_message=None) for p in partitions]))
            continue
        answers, high_watermarks = await asyncio.gather(
            asyncio.gather(*(persister.read_state_summary(group_id, info.topic_id, p) for p in partitions)),
            _high_watermarks(context, name, partitions))
        out.append(Topic(topic_name=name, topic_id=info.topic_id, partitions=[
            _partition(p, answer, high_watermarks.get(p)) for p, answer in zip(partitions, answers)]))
    for name, partitions in refused.items():
        info = topics.get(name)
        out.append(Topic(topic_name=name, topic_id=info.topic_id if info else ZERO_UUID, partitions=[
            Partition(partition_index=p, start_offset=NO_START_OFFSET, leader_epoch=0, lag=NO_LAG,
                      error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                      error_message=ErrorCode.TOPIC_AUTHORIZATION_FAILED.description) for p in partitions]))
    return Group(group_id=group_id, topics=out, error_code=0, error_message=None)


def _partition(index: int, answer, high_watermark: int | None) -> Partition:
    state = answer.state
    if answer.error is not ErrorCode.NONE or state is None:
        return Partition(partition_index=index, start_offset=NO_START_OFFSET, leader_epoch=0, lag=NO_LAG,
                         error_code=0, error_message=None)
    return Partition(partition_index=index, start_offset=state.start_offset, leader_epoch=state.leader_epoch,
                     lag=share_partition_lag(high_watermark, state.start_offset, state.delivery_complete_count),
                     error_code=0, error_message=None)


async def _high_watermarks(context: RequestContext, topic: str, partitions: list[int]) -> dict[int, int | None]:
    offsets = context.services.partition_offsets
    if offsets is not None:
        return await offsets.high_watermarks(topic, partitions)
    out: dict[int, int | None] = {}
    for index in partitions:  # services built without it (tests): what this broker leads
        try:
            out[index] = context.services.replicas.leader_partition(topic, index).high_watermark
        except Exception:  # noqa: BLE001 - not led here, or gone: unknown
            out[index] = None
    return out


def share_partition_lag(high_watermark: int | None, start_offset: int, delivery_complete_count: int) -> int:
    """Kafka's lag of a share partition: the records from the start offset to the high watermark not done
    yet; -1 when unknown."""
    if (high_watermark is None or start_offset == NO_START_OFFSET
            or delivery_complete_count == NO_DELIVERY_COMPLETE_COUNT):
        return NO_LAG
    return max(high_watermark - start_offset - delivery_complete_count, 0)


def _refused(group_id: str, error: ErrorCode) -> Group:
    return Group(group_id=group_id, topics=[], error_code=int(error), error_message=error.description)


def error_response(context: RequestContext, request: DescribeShareGroupOffsetsRequest, error_code: ErrorCode):
    return DescribeShareGroupOffsetsResponse(throttle_time_ms=0,
                                             groups=[_refused(g.group_id, error_code) for g in request.groups])
