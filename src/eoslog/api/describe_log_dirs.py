"""DescribeLogDirs (key 35), v1-4: this broker's log directory, with the size and offset lag of each local
replica (leader or follower) and the volume's total and usable bytes, as Kafka 4.x answers it.

An eoslog broker has one log directory (its data directory), so the answer has one entry; a client that
wants every broker's asks each broker, as it does of Kafka. Kafka's rules kept here: DESCRIBE on the
CLUSTER, else CLUSTER_AUTHORIZATION_FAILED with no directories; a null topic list means every local
replica; a requested partition this broker does not hold is left out (not an error), and so is a topic
with none of its partitions here. No replica is ever a future one (AlterReplicaLogDirs has nowhere to move
it: api/alter_replica_log_dirs.py). v5's cordoned flag (KIP-1066, newer than the Kafka 4.1 that eoslog
answers as) is not served.
"""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING

from eoslog.protocol.messages import DescribeLogDirsResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from collections.abc import Iterable

    from eoslog.api.context import RequestContext
    from eoslog.cluster.partition import Partition
    from eoslog.protocol.errors import ErrorCode
    from eoslog.protocol.messages import DescribeLogDirsRequest

API_KEY = 35
MIN_VERSION = 1
MAX_VERSION = 4

Result = DescribeLogDirsResponse.DescribeLogDirsResult
Topic = DescribeLogDirsResponse.DescribeLogDirsTopic
PartitionInfo = DescribeLogDirsResponse.DescribeLogDirsPartition


def describe_log_dir(log_dir: str, replicas: Iterable[tuple[tuple[str, int], Partition]],
                     wanted: set[tuple[str, int]] | None, total_bytes: int, usable_bytes: int) -> Result:
    """The directory's entry: ``replicas`` are the local ones, ``wanted`` None for all of them."""
    by_topic: dict[str, list] = {}
    for (topic, index), partition in replicas:
        if wanted is not None and (topic, index) not in wanted:
            continue
        # Kafka's lag of a current (not future) log: how far the high watermark is past the log end,
        # never negative; on a leader and on an in-sync follower it is 0.
        lag = max(partition.high_watermark - partition.log_end_offset, 0)
        by_topic.setdefault(topic, []).append(PartitionInfo(partition_index=index, partition_size=partition.log.size,
                                                           offset_lag=lag, is_future_key=False))
    topics = [Topic(name=name, partitions=sorted(parts, key=lambda p: p.partition_index))
              for name, parts in sorted(by_topic.items())]
    return Result(error_code=0, log_dir=log_dir, topics=topics, total_bytes=total_bytes, usable_bytes=usable_bytes)


def handle(context: RequestContext, request: DescribeLogDirsRequest):
    context.require(AclOperation.DESCRIBE, ResourceType.CLUSTER)
    wanted = None if request.topics is None else {(t.topic, index) for t in request.topics for index in t.partitions}
    log_dir = os.path.abspath(context.registry.log_directory.data_dir)
    usage = shutil.disk_usage(log_dir)  # Java's FileStore total and usable space: statvfs, as here
    result = describe_log_dir(log_dir, list(context.services.replicas.partitions.items()), wanted,
                              usage.total, usage.free)
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=0, results=[result])


def error_response(context: RequestContext, request: DescribeLogDirsRequest, code: ErrorCode):
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=int(code), results=[])
