"""Metadata (key 3): brokers, topics and partitions; auto-creates topics when the broker allows it."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from eoslog.cluster.topics import validate_topic_name
from eoslog.protocol.error_mapping import error_code_for
from eoslog.protocol.errors import ErrorCode, KafkaError
from eoslog.protocol.messages import MetadataResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import MetadataRequest

API_KEY = 3
MIN_VERSION = 0
MAX_VERSION = 13

Broker = MetadataResponse.MetadataResponseBroker
Topic = MetadataResponse.MetadataResponseTopic
NO_TOPIC_ID = uuid.UUID(int=0)  # Kafka's ZERO_UUID: no topic id
UNKNOWN_OPERATIONS = -(2**31)


def topic_entry(services, info, listener: str = "PLAINTEXT", version: int = MAX_VERSION) -> Topic:
    """One existing topic as Metadata answers it (DescribeTopicPartitions answers its partitions alike):
    its partitions as the metadata cache has them (cluster/metadata_cache.py)."""
    return Topic(error_code=0, name=info.name, topic_id=info.topic_id, is_internal=info.is_internal,
                 partitions=services.metadata.topic_partitions(info, listener, version),
                 topic_authorized_operations=UNKNOWN_OPERATIONS)


def _error_entry(name, topic_id, code: ErrorCode) -> Topic:
    return Topic(error_code=int(code), name=name, topic_id=topic_id, is_internal=False, partitions=[],
                 topic_authorized_operations=UNKNOWN_OPERATIONS)


def handle(context: RequestContext, request: MetadataRequest):
    services = context.services
    version = context.api_version
    listener = context.listener_name  # every broker's endpoint of this listener
    topics = []
    if request.topics is None or (version == 0 and not request.topics):
        # null (v1+) or empty (v0) means every topic: every topic the principal may DESCRIBE
        listed = services.registry.topics.topics.values()
        visible = context.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, {i.name for i in listed})
        if len(visible) < len(listed):
            listed = [info for info in listed if info.name in visible]
        topics = [topic_entry(services, info, listener, version) for info in listed]
    else:
        allow_auto_create = request.allow_auto_topic_creation if version >= 4 else True
        for wanted in request.topics:
            name = wanted.name
            if name is None and getattr(wanted, "topic_id", None) is not None:
                info = services.registry.topics.by_id.get(wanted.topic_id)
                if info is not None and not context.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, info.name):
                    topics.append(_error_entry(None, wanted.topic_id, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                elif info is None:
                    topics.append(_error_entry(None, wanted.topic_id, ErrorCode.UNKNOWN_TOPIC_ID))
                else:
                    topics.append(topic_entry(services, info, listener, version))
                continue
            if not context.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                # Refused whether or not it exists: the answer must not tell.
                topics.append(_error_entry(name, NO_TOPIC_ID, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            info = services.registry.topics.get(name)
            if info is None:
                try:
                    validate_topic_name(name)
                    if not (allow_auto_create and services.registry.auto_creates_topics):
                        topics.append(_error_entry(name, NO_TOPIC_ID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                        continue
                    if not (context.authorize(AclOperation.CREATE, ResourceType.CLUSTER)
                            or context.authorize(AclOperation.CREATE, ResourceType.TOPIC, name)):
                        topics.append(_error_entry(name, NO_TOPIC_ID, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                        continue
                    info = services.registry.auto_create_topic(name)
                    if info is None:  # being created in the background (a cluster): ask again
                        topics.append(_error_entry(name, NO_TOPIC_ID, ErrorCode.LEADER_NOT_AVAILABLE))
                        continue
                except KafkaError as exc:
                    topics.append(_error_entry(name, NO_TOPIC_ID, error_code_for(exc)))
                    continue
            topics.append(topic_entry(services, info, listener, version))
    if 8 <= version and request.include_topic_authorized_operations:
        for entry in topics:
            if entry.error_code == 0:
                entry.topic_authorized_operations = context.authorized_operations(ResourceType.TOPIC, entry.name)
    # Brokers without the client's listener are left out, as Kafka leaves them out.
    brokers = [Broker(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
               for b in services.metadata.brokers(listener)]
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=brokers,
        cluster_id=services.cluster_id,
        controller_id=services.metadata.controller_id(),
        topics=topics,
        cluster_authorized_operations=context.authorized_operations(ResourceType.CLUSTER)
        if 8 <= version <= 10 and request.include_cluster_authorized_operations else UNKNOWN_OPERATIONS,
        error_code=0,
    )
