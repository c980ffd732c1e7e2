"""OffsetCommit (key 8), v1-9: a group's committed positions, answered once durable.

v1, which Kafka 4.0 dropped (KIP-896), is served as Kafka 3.9 served it (docs/clients.md): its
``commit_timestamp`` is the commit's time when set (-1: the coordinator's clock). v0, whose offsets
Kafka 3.9 kept in ZooKeeper, is not served.

v2-4 carry ``retention_time_ms`` (an explicit expiry, KIP-211 removed it in v5), v6+ the leader epoch,
v7+ the static member's instance id. v9 is v8 for classic groups (its new fields serve KIP-848
groups, which eoslog does not run). v10 names topics by id and is not advertised. Partitions of
topics that do not exist get UNKNOWN_TOPIC_OR_PARTITION, as in Kafka."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.api._group_common import commit_response, group_coordinator, respond_to_commit
from eoslog.coordinator.group import PartitionCommit
from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import OffsetCommitResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import OffsetCommitRequest

API_KEY = 8
MIN_VERSION = 1
MAX_VERSION = 9



def known_partition(services, topic: str, index: int) -> bool:
    return services.registry.exists(topic, index)


def split_known(services, topics, epoch_of, readable=None, timestamp_of=lambda p: -1):
    """(commits of existing partitions, {(topic, partition): error code} of the others). Topics outside
    ``readable`` (when given) are refused with TOPIC_AUTHORIZATION_FAILED."""
    commits, errors = [], {}
    for topic in topics:
        for p in topic.partitions:
            if readable is not None and topic.name not in readable:
                errors[(topic.name, p.partition_index)] = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            elif known_partition(services, topic.name, p.partition_index):
                commits.append(PartitionCommit(topic.name, p.partition_index, p.committed_offset, epoch_of(p),
                                               p.committed_metadata, timestamp_of(p)))
            else:
                errors[(topic.name, p.partition_index)] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    return commits, errors


def handle(context: RequestContext, request: OffsetCommitRequest):
    version = context.api_version
    context.require(AclOperation.READ, ResourceType.GROUP, request.group_id)
    readable = context.authorized_names(AclOperation.READ, ResourceType.TOPIC, {t.name for t in request.topics})
    commits, errors = split_known(context.services, request.topics,
                                  lambda p: p.committed_leader_epoch if version >= 6 else -1, readable,
                                  (lambda p: p.commit_timestamp) if version == 1 else (lambda p: -1))
    answer = None
    if commits:
        answer = group_coordinator(context).call(
            "commit_offsets", request.group_id, commits, member_id=request.member_id,
            generation_id=request.generation_id_or_member_epoch,
            group_instance_id=request.group_instance_id if version >= 7 else None,
            retention_ms=request.retention_time_ms if version <= 4 else -1, api_version=version)
    return respond_to_commit(OffsetCommitResponse, request, answer, errors)


def error_response(context: RequestContext, request: OffsetCommitRequest, error_code: ErrorCode):
    errors = {}
    return commit_response(OffsetCommitResponse, request, errors, default=int(error_code))
