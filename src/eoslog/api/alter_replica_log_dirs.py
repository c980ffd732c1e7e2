"""AlterReplicaLogDirs (key 34), v1-2: move local replicas to another log directory of their broker.

An eoslog broker has one log directory, so this is Kafka's answer for a broker with one ``log.dirs``
entry (ReplicaManager.alterReplicaLogDirs): a move to that directory (its absolute path, as
DescribeLogDirs names it) succeeds and moves nothing; any other path is LOG_DIR_NOT_FOUND; a partition
with no replica here is REPLICA_NOT_AVAILABLE; a topic name too long for Kafka's future-log directory
name is INVALID_TOPIC_EXCEPTION. Alter on the CLUSTER, else every partition CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import AlterReplicaLogDirsResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from collections.abc import Container

    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import AlterReplicaLogDirsRequest

API_KEY = 34
MIN_VERSION = 1
MAX_VERSION = 2

TopicResult = AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult
PartitionResult = AlterReplicaLogDirsResponse.AlterReplicaLogDirPartitionResult

# Kafka names a future log "<topic>-<partition>.<32 hex digits>-future", and a file name has 255 bytes
FUTURE_SUFFIX_LENGTH = 1 + 32 + len("-future")
MAX_FILE_NAME = 255


def partition_dirs(request: AlterReplicaLogDirsRequest) -> dict[tuple[str, int], str]:
    """Each partition's destination; a partition named twice goes where it is named last, as in Kafka."""
    return {(topic.name, index): d.path for d in request.dirs for topic in d.topics for index in topic.partitions}


def decide(destinations: dict[tuple[str, int], str], log_dir: str,
           local: Container[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode]:
    """Kafka's checks in its order: the name, the directory, the replica."""
    outcome = {}
    for (topic, index), path in destinations.items():
        if len(f"{topic}-{index}".encode()) + FUTURE_SUFFIX_LENGTH > MAX_FILE_NAME:
            outcome[(topic, index)] = ErrorCode.INVALID_TOPIC_EXCEPTION
        elif path != log_dir:
            outcome[(topic, index)] = ErrorCode.LOG_DIR_NOT_FOUND
        elif (topic, index) not in local:
            outcome[(topic, index)] = ErrorCode.REPLICA_NOT_AVAILABLE
        else:
            outcome[(topic, index)] = ErrorCode.NONE  # already there: nothing to move
    return outcome


def _response(outcome: dict[tuple[str, int], ErrorCode]) -> AlterReplicaLogDirsResponse:
    by_topic: dict[str, list] = {}
    for (topic, index), error in outcome.items():
        by_topic.setdefault(topic, []).append(PartitionResult(partition_index=index, error_code=int(error)))
    return AlterReplicaLogDirsResponse(throttle_time_ms=0, results=[
        TopicResult(topic_name=topic, partitions=partitions) for topic, partitions in by_topic.items()])


def handle(context: RequestContext, request: AlterReplicaLogDirsRequest):
    context.require(AclOperation.ALTER, ResourceType.CLUSTER)
    log_dir = os.path.abspath(context.registry.log_directory.data_dir)
    return _response(decide(partition_dirs(request), log_dir, context.services.replicas.partitions))


def error_response(context: RequestContext, request: AlterReplicaLogDirsRequest, code: ErrorCode):
    return _response(dict.fromkeys(partition_dirs(request), code))
