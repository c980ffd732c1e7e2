"""DeleteTopics (key 20): by name (v1-5) or by name or topic id (v6)."""

from __future__ import annotations

import uuid

from eoslog.cluster.topics import INTERNAL_TOPICS
from eoslog.protocol.errors import InvalidTopicError, UnknownTopicIdError
from eoslog.protocol.messages import DeleteTopicsResponse
from eoslog.server.errors import error_code_for

ZERO_UUID = uuid.UUID(int=0)
API_KEY = 20
MIN_VERSION = 1
MAX_VERSION = 6

Result = DeleteTopicsResponse.DeletableTopicResult


def handle(context, request):
    if context.broker.cluster is not None:
        return _delete(context, request)
    return _delete_sync(context, request)


async def _delete(context, request):
    return _delete_sync(context, request, await _cluster_deletions(context, request))


async def _cluster_deletions(context, request) -> dict:
    """Cluster mode: the ZooKeeper deletions first (every broker then drops its replicas)."""
    broker = context.broker
    outcomes: dict = {}
    wanted = ([(t.name, t.topic_id) for t in request.topics] if context.api_version >= 6
              else [(name, None) for name in request.topic_names])
    for name, topic_id in wanted:
        try:
            if name is None:
                info = broker.registry.topics.by_id.get(topic_id)
                if info is None:
                    raise UnknownTopicIdError(f"no topic has id {topic_id}")
                name = info.name
            if name in INTERNAL_TOPICS:
                raise InvalidTopicError(f"the internal topic {name} cannot be deleted")
            outcomes[(name, topic_id)] = await broker.registry.topics.delete(name)
        except Exception as exc:  # noqa: BLE001
            outcomes[(name, topic_id)] = exc
    return outcomes


def _delete_sync(context, request, outcomes: dict | None = None):
    broker = context.broker
    if context.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, None) for name in request.topic_names]
    results = []
    for name, topic_id in wanted:
        if outcomes is not None:
            outcome = outcomes.get((name, topic_id))
            if isinstance(outcome, Exception):
                results.append(Result(name=name, topic_id=topic_id or ZERO_UUID,
                                      error_code=int(error_code_for(outcome)), error_message=str(outcome)))
            else:
                results.append(Result(name=outcome.name, topic_id=outcome.topic_id, error_code=0, error_message=None))
            continue
        try:
            if name is None:
                info = broker.registry.topics.by_id.get(topic_id)
                if info is None:
                    raise UnknownTopicIdError(f"no topic has id {topic_id}")
                name = info.name
            if name in INTERNAL_TOPICS:
                raise InvalidTopicError(f"the internal topic {name} cannot be deleted")
            info = broker.registry.delete_topic(name)
            results.append(Result(name=name, topic_id=info.topic_id, error_code=0, error_message=None))
        except Exception as exc:  # noqa: BLE001
            results.append(Result(name=name, topic_id=topic_id or ZERO_UUID, error_code=int(error_code_for(exc)),
                                  error_message=str(exc)))
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)
