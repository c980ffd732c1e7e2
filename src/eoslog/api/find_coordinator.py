"""FindCoordinator (key 10), v0-4: the leader of the key's internal partition (``__consumer_offsets`` for a
group, ``__transaction_state`` for a transactional id), as the metadata cache has it: on a single node,
this broker for every key. A transactional id's lookup creates ``__transaction_state`` if it does not
exist yet, as in Kafka. v4 batches keys (KIP-699); v5-6 only add error codes for newer coordinator
types and are not advertised."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from eoslog.cluster.topics import CONSUMER_OFFSETS, TRANSACTION_STATE
from eoslog.protocol.coordinator_partition import partition_for
from eoslog.protocol.errors import CoordinatorNotAvailableError, ErrorCode
from eoslog.protocol.messages import FindCoordinatorResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import FindCoordinatorRequest

API_KEY = 10
MIN_VERSION = 0
MAX_VERSION = 4

GROUP, TRANSACTION = 0, 1
# DESCRIBE on the key's resource is needed to learn its coordinator (Kafka's rule).
_KEY_RESOURCES = {GROUP: (ResourceType.GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED),
                  TRANSACTION: (ResourceType.TRANSACTIONAL_ID, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)}
Coordinator = FindCoordinatorResponse.Coordinator


def handle(context: RequestContext, request: FindCoordinatorRequest):
    services = context.services
    key_type = request.key_type if context.api_version >= 1 else GROUP
    code = 0 if key_type in (GROUP, TRANSACTION) else int(ErrorCode.INVALID_REQUEST)
    ok = code == 0
    keys = request.coordinator_keys if context.api_version >= 4 else [request.key]
    refused = set()
    if ok:
        resource_type, refusal = _KEY_RESOURCES[key_type]
        refused = set(keys) - context.authorized_names(AclOperation.DESCRIBE, resource_type, keys)
    if ok:
        topic = CONSUMER_OFFSETS if key_type == GROUP else TRANSACTION_STATE
        if key_type == TRANSACTION and set(keys) - refused:
            # Created on first use, as Kafka's FindCoordinator does, so a client that looks up the topic's
            # partitions next (the Spark sink colocates its transactional ids with them) finds them. A
            # cluster asks the controller, and answers COORDINATOR_NOT_AVAILABLE until it has leaders.
            try:
                services.coordinators.ensure_topic(TRANSACTION_STATE)
            except CoordinatorNotAvailableError:
                pass
        # The leader of the key's internal partition, at its endpoint of the listener the client came in on.
        listener = context.listener_name
        answers = [services.metadata.coordinator(topic, functools.partial(partition_for, key), listener) for key in keys]
    else:
        answers = [(code, -1, "", -1) for _ in keys]
    if refused:
        answers = [(int(refusal), -1, "", -1) if key in refused else answer for key, answer in zip(keys, answers)]
    if context.api_version >= 4:
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
            Coordinator(key=key, node_id=n, host=h, port=p, error_code=c, error_message=None)
            for key, (c, n, h, p) in zip(keys, answers)])
    c, n, h, p = answers[0]
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=c, error_message=None, node_id=n, host=h, port=p)


def error_response(context: RequestContext, request: FindCoordinatorRequest, code: ErrorCode):
    if context.api_version >= 4:
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
            Coordinator(key=key, node_id=-1, host="", port=-1, error_code=int(code), error_message=None)
            for key in request.coordinator_keys])
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=int(code), error_message=None, node_id=-1,
                                   host="", port=-1)
