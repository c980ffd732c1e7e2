"""CreatePartitions (key 37): grow a topic's partition count."""

from __future__ import annotations

from eoslog.cluster.topics import INTERNAL_TOPICS
from eoslog.protocol.errors import InvalidPartitionsError, InvalidTopicError
from eoslog.protocol.messages import CreatePartitionsResponse
from eoslog.server.errors import error_code_for

API_KEY = 37
MIN_VERSION = 0
MAX_VERSION = 3

Result = CreatePartitionsResponse.CreatePartitionsTopicResult


async def _grow_in_cluster(context, request):
    broker = context.broker
    results = []
    for topic in request.topics:
        try:
            if topic.name in INTERNAL_TOPICS:
                raise InvalidTopicError(f"the internal topic {topic.name} cannot be resized")
            info = broker.registry.topics.require(topic.name)
            if topic.count <= info.partitions:
                raise InvalidPartitionsError(
                    f"topic {topic.name} has {info.partitions} partitions; the new count {topic.count} must be larger")
            manual = None
            if topic.assignments:
                manual = {info.partitions + i: list(a.broker_ids) for i, a in enumerate(topic.assignments)}
            if not request.validate_only:
                await broker.registry.topics.add_partitions(topic.name, topic.count, max(request.timeout_ms, 0) / 1000, manual)
            results.append(Result(name=topic.name, error_code=0, error_message=None))
        except Exception as exc:  # noqa: BLE001
            results.append(Result(name=topic.name, error_code=int(error_code_for(exc)), error_message=str(exc)))
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)


def handle(context, request):
    broker = context.broker
    if broker.cluster is not None:
        return _grow_in_cluster(context, request)
    results = []
    for topic in request.topics:
        try:
            if topic.name in INTERNAL_TOPICS:
                raise InvalidTopicError(f"the internal topic {topic.name} cannot be resized")
            info = broker.registry.topics.require(topic.name)
            if topic.count <= info.partitions:
                raise InvalidPartitionsError(
                    f"topic {topic.name} has {info.partitions} partitions; the new count {topic.count} must be larger"
                )
            if not request.validate_only:
                broker.registry.create_partitions(topic.name, topic.count)
            results.append(Result(name=topic.name, error_code=0, error_message=None))
        except Exception as exc:  # noqa: BLE001
            results.append(Result(name=topic.name, error_code=int(error_code_for(exc)), error_message=str(exc)))
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)
