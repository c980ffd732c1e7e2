"""OffsetFetch (key 9), v1-9: a group's committed offsets (-1 where none).

v2+ may ask for every partition (null topics) and carry a top-level error, v5+ the leader epoch, v7+
``require_stable`` (KIP-447: a partition whose offset awaits a transaction marker or a write answers
UNSTABLE_OFFSET_COMMIT, and the client retries), v8+ batch groups, v9+ the member id and epoch of a
consumer-protocol member (KIP-848: checked against a consumer group like a commit's). v10 names topics
by id and is not advertised."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from eoslog.api._group_common import code, group_coordinator
from eoslog.coordinator.group.errors import Errors
from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import OffsetFetchResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import OffsetFetchRequest

API_KEY = 9
MIN_VERSION = 1
MAX_VERSION = 9

Topic = OffsetFetchResponse.OffsetFetchResponseTopic
Partition = OffsetFetchResponse.OffsetFetchResponsePartition
Group = OffsetFetchResponse.OffsetFetchResponseGroup
Topics = OffsetFetchResponse.OffsetFetchResponseTopics
Partitions = OffsetFetchResponse.OffsetFetchResponsePartitions


def _fetch(context, coordinator, group_id, topics, require_stable, member_id=None, member_epoch=-1):
    """(group error, {topic: [(partition, offset, epoch, metadata, code)]}) in request order.

    Needs DESCRIBE on the group; a named topic the principal may not DESCRIBE answers
    TOPIC_AUTHORIZATION_FAILED, and "every topic" leaves such topics out."""
    by_topic = defaultdict(list)
    if not context.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        for t in topics or ():
            by_topic[t.name].extend((p, -1, -1, "", int(ErrorCode.GROUP_AUTHORIZATION_FAILED))
                                    for p in t.partition_indexes)
        return int(ErrorCode.GROUP_AUTHORIZATION_FAILED), by_topic
    wanted = None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
    if wanted is not None:
        described = context.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, {t.name for t in topics})
        for name, index in wanted:
            if name not in described:
                by_topic[name].append((index, -1, -1, "", int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)))
        wanted = [(name, index) for name, index in wanted if name in described]
    resp = coordinator.fetch_offsets(group_id, wanted, require_stable=require_stable, member_id=member_id,
                                       member_epoch=member_epoch)
    if resp.error is not Errors.NONE:
        for name, index in wanted or ():
            by_topic[name].append((index, -1, -1, "", code(resp.error)))
        return code(resp.error), by_topic
    hidden = set()
    if topics is None:
        names = {f.topic for f in resp.partitions}
        hidden = names - context.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    for f in resp.partitions:
        if f.topic in hidden:
            continue
        by_topic[f.topic].append((f.partition, f.offset, f.leader_epoch, f.metadata or "", code(f.error)))
    return 0, by_topic


def handle(context: RequestContext, request: OffsetFetchRequest):
    version = context.api_version
    coordinator = group_coordinator(context)
    require_stable = request.require_stable if version >= 7 else False
    if version >= 8:
        groups = []
        for g in request.groups:
            member = (g.member_id, g.member_epoch) if version >= 9 else (None, -1)
            error, by_topic = _fetch(context, coordinator, g.group_id, g.topics, require_stable, *member)
            groups.append(Group(group_id=g.group_id, error_code=error, topics=[] if error else [
                Topics(name=name, partitions=[
                    Partitions(partition_index=i, committed_offset=o, committed_leader_epoch=e, metadata=m,
                               error_code=c) for i, o, e, m, c in rows])
                for name, rows in by_topic.items()]))
        return OffsetFetchResponse(throttle_time_ms=0, groups=groups)
    topics = request.topics if version >= 2 else list(request.topics or ())
    error, by_topic = _fetch(context, coordinator, request.group_id, topics, require_stable)
    if error and version >= 2:
        by_topic = {}
    return OffsetFetchResponse(throttle_time_ms=0, error_code=error, topics=[
        Topic(name=name, partitions=[
            Partition(partition_index=i, committed_offset=o, committed_leader_epoch=e, metadata=m, error_code=c)
            for i, o, e, m, c in rows])
        for name, rows in by_topic.items()])


def error_response(context: RequestContext, request: OffsetFetchRequest, error_code: ErrorCode):
    if context.api_version >= 8:
        return OffsetFetchResponse(throttle_time_ms=0, groups=[
            Group(group_id=g.group_id, error_code=int(error_code), topics=[]) for g in request.groups])
    return OffsetFetchResponse(throttle_time_ms=0, error_code=int(error_code), topics=[])
