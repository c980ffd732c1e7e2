"""CreateTopics (key 19). A single node: replication factor must be -1 or 1."""

from __future__ import annotations

import uuid

from eoslog.cluster.topic_configs import describe_topic_configs
from eoslog.protocol.errors import InvalidReplicationFactorError, InvalidRequestError
from eoslog.protocol.messages import CreateTopicsResponse
from eoslog.server.errors import error_code_for

ZERO_UUID = uuid.UUID(int=0)
API_KEY = 19
MIN_VERSION = 2
MAX_VERSION = 7

Result = CreateTopicsResponse.CreatableTopicResult
ConfigEntry = CreateTopicsResponse.CreatableTopicConfigs


def handle(context, request):
    broker = context.broker
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
            info = broker.create_topic(topic.name, topic.num_partitions, configs, validate_only=request.validate_only)
        except Exception as exc:  # noqa: BLE001
            results.append(Result(name=topic.name, topic_id=ZERO_UUID, error_code=int(error_code_for(exc)),
                                  error_message=str(exc), num_partitions=-1, replication_factor=-1, configs=None))
            continue
        results.append(Result(
            name=info.name, topic_id=info.topic_id, error_code=0, error_message=None,
            num_partitions=info.partitions, replication_factor=1,
            configs=[ConfigEntry(name=name, value=value, read_only=False, config_source=source, is_sensitive=False)
                     for name, value, source in describe_topic_configs(broker, info)],
        ))
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)
