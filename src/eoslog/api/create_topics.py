"""CreateTopics (key 19). A single node: replication factor must be -1 or 1. A cluster: replication factor
and manual replica assignments, written to ZooKeeper (cluster/cluster_topics.py)."""

from __future__ import annotations

import uuid

from eoslog.cluster.topic_configs import check_names, describe_topic_configs
from eoslog.cluster.topics import TopicInfo
from eoslog.protocol.errors import InvalidReplicationFactorError, InvalidRequestError
from eoslog.protocol.messages import CreateTopicsResponse
from eoslog.server.errors import error_code_for

ZERO_UUID = uuid.UUID(int=0)
API_KEY = 19
MIN_VERSION = 2
MAX_VERSION = 7

Result = CreateTopicsResponse.CreatableTopicResult
ConfigEntry = CreateTopicsResponse.CreatableTopicConfigs


async def _create_in_cluster(context, request):
    """Assignment (given, or Kafka's round robin over live brokers, rack-aware), then ZooKeeper; the
    answer waits, up to the request's timeout, until every partition has a leader."""
    broker = context.broker
    results = []
    for topic in request.topics:
        try:
            configs = {c.name: c.value for c in topic.configs if c.value is not None}
            check_names(configs)
            broker.registry.check_topic_configs(configs)
            count = broker.config.num_partitions if topic.num_partitions == -1 else topic.num_partitions
            factor = (broker.config.default_replication_factor if topic.replication_factor == -1
                      else topic.replication_factor)
            manual = {a.partition_index: list(a.broker_ids) for a in topic.assignments} or None
            if manual and (topic.num_partitions != -1 or topic.replication_factor != -1):
                raise InvalidRequestError("give either a replica assignment or partitions and replication factor")
            if not manual and count < 1:
                from eoslog.protocol.errors import InvalidPartitionsError

                raise InvalidPartitionsError(f"a topic needs at least one partition, got {count}")
            replicas = broker.registry.topics.plan_assignment(count, factor, manual)
            if request.validate_only:
                from eoslog.cluster.topics import validate_topic_name

                validate_topic_name(topic.name)
                info = TopicInfo(topic.name, ZERO_UUID, len(replicas), configs)
            else:
                info = await broker.registry.topics.create(topic.name, replicas, configs,
                                                  timeout_s=max(request.timeout_ms, 0) / 1000)
        except Exception as exc:  # noqa: BLE001
            results.append(Result(name=topic.name, topic_id=ZERO_UUID, error_code=int(error_code_for(exc)),
                                  error_message=str(exc), num_partitions=-1, replication_factor=-1, configs=None))
            continue
        results.append(Result(
            name=info.name, topic_id=info.topic_id, error_code=0, error_message=None,
            num_partitions=info.partitions, replication_factor=len(replicas[min(replicas)]),
            configs=[ConfigEntry(name=name, value=value, read_only=False, config_source=source, is_sensitive=False)
                     for name, value, source in describe_topic_configs(broker.registry, info)],
        ))
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)


def handle(context, request):
    broker = context.broker
    if broker.cluster is not None:
        return _create_in_cluster(context, request)
    results = []
    for topic in request.topics:
        try:
            if topic.replication_factor not in (-1, 1):
                raise InvalidReplicationFactorError(
                    f"replication factor {topic.replication_factor} is larger than the 1 broker available"
                )
            if topic.assignments:
                raise InvalidRequestError("manual replica assignment is not supported on a single node")
            configs = {c.name: c.value for c in topic.configs if c.value is not None}
            info = broker.registry.create_topic(topic.name, topic.num_partitions, configs, validate_only=request.validate_only)
        except Exception as exc:  # noqa: BLE001
            results.append(Result(name=topic.name, topic_id=ZERO_UUID, error_code=int(error_code_for(exc)),
                                  error_message=str(exc), num_partitions=-1, replication_factor=-1, configs=None))
            continue
        results.append(Result(
            name=info.name, topic_id=info.topic_id, error_code=0, error_message=None,
            num_partitions=info.partitions, replication_factor=1,
            configs=[ConfigEntry(name=name, value=value, read_only=False, config_source=source, is_sensitive=False)
                     for name, value, source in describe_topic_configs(broker.registry, info)],
        ))
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)
