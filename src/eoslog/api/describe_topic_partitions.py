"""DescribeTopicPartitions (key 75, KIP-966): Metadata's topic answer, paged by partition count.

The Java admin client (3.8+) describes topics with it. Kafka 4.x's rules, which we follow:
- No topics named means every topic the principal may DESCRIBE (others silently left out); named
  topics the principal may not DESCRIBE are answered TOPIC_AUTHORIZATION_FAILED with no topic id,
  after the others, whether or not they exist. Named topics that do not exist are answered
  UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an illegal name); in the every-topic form
  topics with errors are left out.
- Topics are answered in name order, from the cursor's topic on; the cursor's topic starts at the
  cursor's partition (if the principal may describe it), every later one at partition 0. A cursor
  naming a topic that the named topics do not include is an INVALID_REQUEST.
- At most min(ResponsePartitionLimit, 2000) partitions are answered (2000 is Kafka's
  max.request.partition.size.limit default). When a topic does not fit, NextCursor names the topic and
  the first partition left out; when the limit is used up exactly and topics remain, NextCursor names
  the next topic at partition 0.
- Partitions as Metadata answers them (leader, epoch, replicas, ISR, offline replicas, leader not
  available / listener not found); eligible leader replicas (KIP-966 ELR) are empty lists, as Kafka
  answers when ELR is off -- eoslog has no ELR.

``page`` is the pure core: which partitions of which topics go into one response.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.api import metadata
from eoslog.cluster.topics import validate_topic_name
from eoslog.protocol.errors import ErrorCode, InvalidRequestError, KafkaError
from eoslog.protocol.messages import DescribeTopicPartitionsResponse
from eoslog.protocol.schema import ZERO_UUID
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import DescribeTopicPartitionsRequest

API_KEY = 75
MIN_VERSION = 0
MAX_VERSION = 0

MAX_REQUEST_PARTITION_SIZE_LIMIT = 2000  # Kafka's max.request.partition.size.limit default

Topic = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic
Partition = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponsePartition
Cursor = DescribeTopicPartitionsResponse.Cursor


def page(topics: list[tuple[str, int | None]], first_partition: dict[str, int], limit: int,
         skip_missing: bool) -> tuple[list[tuple[str, range | None]], tuple[str, int] | None]:
    """``topics``: (name, partition count, or None when it cannot be answered) in answer order.
    Returns (name, partition indexes to answer, None for an error entry) per topic answered, and the
    next cursor (topic, partition) if the limit cut the answer short."""
    answered: list[tuple[str, range | None]] = []
    remaining = limit
    for name, count in topics:
        if remaining > 0:
            if count is None:
                if not skip_missing:
                    answered.append((name, None))
                continue
            start = first_partition.get(name, 0)
            end = min(count, start + remaining)
            answered.append((name, range(start, max(end, start))))
            if end < count:
                return answered, (name, end)
            remaining -= max(end - start, 0)
        elif remaining == 0:
            return answered, (name, 0)
    return answered, None


def handle(context: RequestContext, request: DescribeTopicPartitionsRequest):
    services = context.services
    every_topic = not request.topics
    cursor = request.cursor
    cursor_name = cursor.topic_name if cursor is not None else ""
    if every_topic:
        names = {name for name in services.registry.topics.topics if name >= cursor_name}
    else:
        names = {t.name for t in request.topics if t.name >= cursor_name}
        if cursor is not None and cursor.topic_name not in names:
            raise InvalidRequestError(f"the topics asked for do not include the cursor's topic {cursor.topic_name}")
    refused = []
    allowed = context.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    if not every_topic:
        refused = [Topic(error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED), name=name, topic_id=ZERO_UUID,
                         is_internal=False, partitions=[]) for name in sorted(names - allowed)]
    names &= allowed
    first_partition = {cursor_name: cursor.partition_index} if cursor is not None and cursor_name in names else {}
    infos = {name: services.registry.topics.get(name) for name in names}
    order = [(name, infos[name].partitions if infos[name] is not None else None) for name in sorted(names)]
    limit = min(MAX_REQUEST_PARTITION_SIZE_LIMIT, request.response_partition_limit)
    answered, next_cursor = page(order, first_partition, limit, skip_missing=every_topic)
    listener = context.listener_name
    topics = []
    for name, indexes in answered:
        info = infos[name]
        if indexes is None:
            topics.append(Topic(error_code=int(_missing_code(name)), name=name, topic_id=ZERO_UUID,
                                is_internal=False, partitions=[]))
            continue
        entry = metadata.topic_entry(services, info, listener)
        partitions = [_partition(p) for p in entry.partitions if p.partition_index in indexes]
        topics.append(Topic(error_code=0, name=name, topic_id=info.topic_id, is_internal=info.is_internal,
                            partitions=partitions,
                            topic_authorized_operations=context.authorized_operations(ResourceType.TOPIC, name)))
    topics.extend(refused)
    return DescribeTopicPartitionsResponse(
        throttle_time_ms=0, topics=topics,
        next_cursor=Cursor(topic_name=next_cursor[0], partition_index=next_cursor[1]) if next_cursor else None)


def _missing_code(name: str) -> ErrorCode:
    try:
        validate_topic_name(name)
    except KafkaError as exc:
        return exc.code
    return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def _partition(p) -> Partition:
    return Partition(error_code=p.error_code, partition_index=p.partition_index, leader_id=p.leader_id,
                     leader_epoch=p.leader_epoch, replica_nodes=list(p.replica_nodes), isr_nodes=list(p.isr_nodes),
                     eligible_leader_replicas=[], last_known_elr=[], offline_replicas=list(p.offline_replicas))


def error_response(context: RequestContext, request: DescribeTopicPartitionsRequest, code: ErrorCode):
    return DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=[
        Topic(error_code=int(code), name=t.name, topic_id=ZERO_UUID, is_internal=False, partitions=[])
        for t in request.topics])
