"""FindCoordinator (key 10), v0-4: the leader of the key's internal partition (``__consumer_offsets`` for a
group, ``__transaction_state`` for a transactional id), as the metadata cache has it: on a single node,
this broker for every key. A transactional id's lookup creates ``__transaction_state`` if it does not
exist yet, as in Kafka. v4 batches keys (KIP-699); v5-6 only add error codes for newer coordinator
types and are not advertised.

Key type 2 (SHARE, KIP-932) names a share partition as "group:topicId:partition": its share coordinator
is the leader of that key's ``__share_group_state`` partition. Brokers ask it (the share-partition
manager of step 4), so it needs CLUSTER_ACTION on the cluster, as Kafka's; Kafka takes it from v6 on,
eoslog from v1 on since it advertises up to v4."""

from __future__ import annotations

import base64
import functools
from typing import TYPE_CHECKING

from eoslog.cluster.topics import CONSUMER_OFFSETS, SHARE_GROUP_STATE, TRANSACTION_STATE
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

GROUP, TRANSACTION, SHARE = 0, 1, 2
# DESCRIBE on the key's resource is needed to learn its coordinator (Kafka's rule).
_KEY_RESOURCES = {GROUP: (ResourceType.GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED),
                  TRANSACTION: (ResourceType.TRANSACTIONAL_ID, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)}
Coordinator = FindCoordinatorResponse.Coordinator


def handle(context: RequestContext, request: FindCoordinatorRequest):
    services = context.services
    key_type = request.key_type if context.api_version >= 1 else GROUP
    code = 0 if key_type in (GROUP, TRANSACTION, SHARE) else int(ErrorCode.INVALID_REQUEST)
    keys = request.coordinator_keys if context.api_version >= 4 else [request.key]
    if key_type == SHARE:
        code = _share_key_code(context)
    ok = code == 0
    refused = set()
    if ok and key_type == SHARE:
        refused, refusal = _malformed_share_keys(keys), ErrorCode.INVALID_REQUEST
    elif ok:
        resource_type, refusal = _KEY_RESOURCES[key_type]
        refused = set(keys) - context.authorized_names(AclOperation.DESCRIBE, resource_type, keys)
    if ok:
        topic = {GROUP: CONSUMER_OFFSETS, TRANSACTION: TRANSACTION_STATE, SHARE: SHARE_GROUP_STATE}[key_type]
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


def _share_key_code(context: RequestContext) -> int:
    """CLUSTER_ACTION is needed to look share coordinators up (brokers do)."""
    if not context.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER):
        return int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    try:
        context.services.coordinators.ensure_topic(SHARE_GROUP_STATE)
    except CoordinatorNotAvailableError:
        pass
    return 0


def _malformed_share_keys(keys: list[str]) -> set[str]:
    """The keys that do not read "group:topicId:partition" (Kafka's SharePartitionKey.getInstance refuses
    them: INVALID_REQUEST), the topic id as Kafka prints it (URL-safe base64 of 16 bytes, unpadded)."""
    bad = set()
    for key in keys:
        parts = key.rsplit(":", 2)
        try:
            if len(parts) != 3 or not parts[0] or not parts[2].isdigit() \
                    or len(base64.urlsafe_b64decode(parts[1] + "==")) != 16:
                bad.add(key)
        except ValueError:
            bad.add(key)
    return bad


def error_response(context: RequestContext, request: FindCoordinatorRequest, code: ErrorCode):
    if context.api_version >= 4:
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
            Coordinator(key=key, node_id=-1, host="", port=-1, error_code=int(code), error_message=None)
            for key in request.coordinator_keys])
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=int(code), error_message=None, node_id=-1,
                                   host="", port=-1)
