"""Metadata (key 3): brokers, topics and partitions; auto-creates topics when the broker allows it."""

from __future__ import annotations

import uuid
from functools import lru_cache

from eoslog.cluster.topics import validate_topic_name
from eoslog.protocol.error_mapping import error_code_for
from eoslog.protocol.errors import ErrorCode, KafkaError
from eoslog.protocol.messages import MetadataResponse
from eoslog.protocol.wire import FrozenArray
from eoslog.security.acl import AclOperation, ResourceType

API_KEY = 3
MIN_VERSION = 0
MAX_VERSION = 13

Broker = MetadataResponse.MetadataResponseBroker
Topic = MetadataResponse.MetadataResponseTopic
PartitionInfo = MetadataResponse.MetadataResponsePartition
NO_TOPIC_ID = uuid.UUID(int=0)  # Kafka's ZERO_UUID: no topic id
UNKNOWN_OPERATIONS = -(2**31)


def topic_entry(broker, info, listener: str = "PLAINTEXT", version: int = MAX_VERSION) -> Topic:
    """One existing topic as Metadata answers it (DescribeTopicPartitions answers its partitions alike)."""
    if broker.cluster is not None:
        return _cluster_topic_entry(broker.cluster.view, info, listener, version)
    node = broker.config.node_id
    return Topic(
        error_code=0,
        name=info.name,
        topic_id=info.topic_id,
        is_internal=info.is_internal,
        partitions=_single_node_partitions(node, info.partitions),
        topic_authorized_operations=UNKNOWN_OPERATIONS,
    )


@lru_cache(maxsize=64)
def _single_node_partitions(node: int, count: int) -> FrozenArray:
    """On one node a topic's partitions are all alike, so (node, count) fixes the array: built and
    encoded once, not per request (50 clients asking about 1,000 partitions cost the broker ~4 ms each)."""
    return FrozenArray(
        PartitionInfo(error_code=0, partition_index=index, leader_id=node, leader_epoch=0,
                      replica_nodes=[node], isr_nodes=[node], offline_replicas=[])
        for index in range(count)
    )


def _cluster_topic_entry(view, info, listener: str, version: int) -> Topic:
    """Leaders, epochs, replicas, ISR and offline replicas as ZooKeeper has them: a partition without a
    leader says LEADER_NOT_AVAILABLE, so clients wait and ask again. A leader that does not serve the
    client's listener is no use to it: LISTENER_NOT_FOUND from v6, LEADER_NOT_AVAILABLE before (Kafka's
    answers)."""
    assignment = view.topics.get(info.name)
    partitions = []
    for index, replicas in sorted(assignment.replicas.items()) if assignment is not None else ():
        state = view.states.get((info.name, index))
        leader = state.leader if state is not None else -1
        code = 0 if leader >= 0 and leader in view.brokers else int(ErrorCode.LEADER_NOT_AVAILABLE)
        if code == 0 and view.brokers[leader].endpoint(listener) is None:
            code = int(ErrorCode.LISTENER_NOT_FOUND if version >= 6 else ErrorCode.LEADER_NOT_AVAILABLE)
        partitions.append(PartitionInfo(
            error_code=code, partition_index=index, leader_id=leader if code == 0 else -1,
            leader_epoch=state.leader_epoch if state is not None else -1, replica_nodes=list(replicas),
            isr_nodes=list(state.isr) if state is not None else [],
            offline_replicas=[r for r in replicas if r not in view.brokers]))
    return Topic(error_code=0, name=info.name, topic_id=info.topic_id, is_internal=info.is_internal,
                 partitions=partitions, topic_authorized_operations=UNKNOWN_OPERATIONS)


def _error_entry(name, topic_id, code: ErrorCode) -> Topic:
    return Topic(error_code=int(code), name=name, topic_id=topic_id, is_internal=False, partitions=[],
                 topic_authorized_operations=UNKNOWN_OPERATIONS)


def handle(context, request):
    broker = context.broker
    version = context.api_version
    listener = broker.listener_name_of(context.connection)  # every broker's endpoint of this listener
    topics = []
    if request.topics is None or (version == 0 and not request.topics):
        # null (v1+) or empty (v0) means every topic: every topic the principal may DESCRIBE
        listed = broker.registry.topics.topics.values()
        if broker.authorizer is not None:
            visible = context.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, {i.name for i in listed})
            listed = [info for info in listed if info.name in visible]
        topics = [topic_entry(broker, info, listener, version) for info in listed]
    else:
        allow_auto_create = request.allow_auto_topic_creation if version >= 4 else True
        for wanted in request.topics:
            name = wanted.name
            if name is None and getattr(wanted, "topic_id", None) is not None:
                info = broker.registry.topics.by_id.get(wanted.topic_id)
                if info is not None and not context.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, info.name):
                    topics.append(_error_entry(None, wanted.topic_id, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                elif info is None:
                    topics.append(_error_entry(None, wanted.topic_id, ErrorCode.UNKNOWN_TOPIC_ID))
                else:
                    topics.append(topic_entry(broker, info, listener, version))
                continue
            if not context.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                # Refused whether or not it exists: the answer must not tell.
                topics.append(_error_entry(name, NO_TOPIC_ID, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            info = broker.registry.topics.get(name)
            if info is None:
                try:
                    validate_topic_name(name)
                    if not (allow_auto_create and broker.config.auto_create_topics_enable):
                        topics.append(_error_entry(name, NO_TOPIC_ID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                        continue
                    if not (context.authorize(AclOperation.CREATE, ResourceType.CLUSTER)
                            or context.authorize(AclOperation.CREATE, ResourceType.TOPIC, name)):
                        topics.append(_error_entry(name, NO_TOPIC_ID, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                        continue
                    if broker.cluster is not None:
                        broker.registry.request_topic_creation(name)
                        topics.append(_error_entry(name, NO_TOPIC_ID, ErrorCode.LEADER_NOT_AVAILABLE))
                        continue
                    info = broker.registry.create_topic(name, None)
                except KafkaError as exc:
                    topics.append(_error_entry(name, NO_TOPIC_ID, error_code_for(exc)))
                    continue
            topics.append(topic_entry(broker, info, listener, version))
    if 8 <= version and request.include_topic_authorized_operations:
        for entry in topics:
            if entry.error_code == 0:
                entry.topic_authorized_operations = context.authorized_operations(ResourceType.TOPIC, entry.name)
    if broker.cluster is not None:
        view = broker.cluster.view
        # Brokers without the client's listener are left out, as Kafka leaves them out.
        brokers = [Broker(node_id=b.broker_id, host=e.host, port=e.port, rack=b.rack)
                   for b in sorted(view.brokers.values(), key=lambda b: b.broker_id)
                   if (e := b.endpoint(listener)) is not None]
        controller_id = view.controller_id
    else:
        host, port = broker.advertised_for(context.connection)  # the listener it came in on
        brokers = [Broker(node_id=broker.config.node_id, host=host, port=port, rack=None)]
        controller_id = broker.config.node_id
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=brokers,
        cluster_id=broker.cluster_id,
        controller_id=controller_id,
        topics=topics,
        cluster_authorized_operations=context.authorized_operations(ResourceType.CLUSTER)
        if 8 <= version <= 10 and request.include_cluster_authorized_operations else UNKNOWN_OPERATIONS,
        error_code=0,
    )
