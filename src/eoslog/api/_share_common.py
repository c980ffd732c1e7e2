"""What ShareFetch (78) and ShareAcknowledge (79) share: the request's partitions as the share-partition
manager takes them (topic ids resolved, READ checked, acknowledgement batches checked for RENEW), and the
partition answers as the wire carries them."""

from __future__ import annotations

from typing import Any

from eoslog.protocol.errors import ErrorCode, InvalidRequestError
from eoslog.security.acl import AclOperation, ResourceType
from eoslog.share.fetch import PartitionAsk, renew_allowed
from eoslog.share.in_flight import AcknowledgementBatch


def check_ids(request: Any) -> None:
    """Kafka's request checks: a group id and a member id are required."""
    if not request.group_id:
        raise InvalidRequestError("GroupId must be given")
    if not request.member_id:
        raise InvalidRequestError("MemberId must be given")


def member_key(context: Any) -> str:
    """The share session's owner: this connection (a session ends when its connection does)."""
    return str(id(context.connection))


def asks(context: Any, topics: Any, renew_only: bool) -> list[PartitionAsk]:
    """The request's partitions: an unknown topic id answers UNKNOWN_TOPIC_ID, a topic the principal may
    not READ answers TOPIC_AUTHORIZATION_FAILED, each for its partitions (Kafka's KafkaApis)."""
    by_id = context.services.registry.topics.by_id
    names = {t.topic_id: (by_id[t.topic_id].name if t.topic_id in by_id else None) for t in topics}
    allowed = context.authorized_names(AclOperation.READ, ResourceType.TOPIC,
                                       [n for n in names.values() if n is not None])
    out = []
    for topic in topics:
        name = names[topic.topic_id]
        error = ErrorCode.NONE
        if name is None:
            error = ErrorCode.UNKNOWN_TOPIC_ID
        elif name not in allowed:
            error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        for p in topic.partitions:
            batches = tuple(AcknowledgementBatch(b.first_offset, b.last_offset, tuple(b.acknowledge_types))
                            for b in (p.acknowledgement_batches or ()))
            ack_error = ErrorCode.NONE if renew_allowed(batches, context.api_version, renew_only) \
                else ErrorCode.INVALID_REQUEST
            out.append(PartitionAsk(topic.topic_id, p.partition_index, batches, error, ack_error))
    return out


def leader(context: Any, topic_id: Any, index: int) -> tuple[int, int]:
    """(leader id, leader epoch) of a partition as this broker knows it, for CurrentLeader: on a cluster the
    view's leader, so a client told NOT_LEADER_OR_FOLLOWER learns where to go."""
    info = context.services.registry.topics.by_id.get(topic_id)
    if info is None:
        return -1, -1
    replicas = context.services.replicas
    if not replicas.sole_broker:
        state = replicas.view.states.get((info.name, index))
        return (-1, -1) if state is None or state.leader < 0 else (state.leader, state.leader_epoch)
    partition = context.services.registry.partitions.get((info.name, index))
    if partition is None:
        return -1, -1
    epoch = partition.leader_epoch if partition.leader_epoch is not None else 0
    return context.services.node_id, epoch


def by_topic(answers) -> dict:
    """Partition answers grouped by topic id, in first-seen order."""
    grouped: dict = {}
    for answer in answers:
        grouped.setdefault(answer.topic_id, []).append(answer)
    return grouped
