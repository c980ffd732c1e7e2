"""FindCoordinator (key 10), v0-4: a single node coordinates every group and every transactional id.

Written with the transaction coordinator (transactional producers cannot start without it); key type 0
(groups) gets the same answer, which is right as soon as the group APIs are served. A transactional id's
lookup creates ``__transaction_state`` if it does not exist yet, as in Kafka. v4 batches keys
(KIP-699); v5-6 only add error codes for newer coordinator types and are not advertised."""

from __future__ import annotations

from eoslog.cluster.topics import CONSUMER_OFFSETS, TRANSACTION_STATE
from eoslog.protocol.coordinator_partition import partition_for
from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import FindCoordinatorResponse
from eoslog.security.acl import AclOperation, ResourceType

API_KEY = 10
MIN_VERSION = 0
MAX_VERSION = 4

GROUP, TRANSACTION = 0, 1
# DESCRIBE on the key's resource is needed to learn its coordinator (Kafka's rule).
_KEY_RESOURCES = {GROUP: (ResourceType.GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED),
                  TRANSACTION: (ResourceType.TRANSACTIONAL_ID, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)}
Coordinator = FindCoordinatorResponse.Coordinator


def _cluster_coordinator(broker, key_type: int, key: str, listener: str) -> tuple[int, int, str, int]:
    """(error, node, host, port): the leader of the key's internal partition, at its endpoint of the
    client's listener. The internal topic is created on first use, as in Kafka; until it has a leader
    (one serving that listener) the answer is COORDINATOR_NOT_AVAILABLE."""
    topic = CONSUMER_OFFSETS if key_type == GROUP else TRANSACTION_STATE
    info = broker.registry.topics.get(topic)
    if info is None:
        broker.registry.request_internal_topic(topic)
        return int(ErrorCode.COORDINATOR_NOT_AVAILABLE), -1, "", -1
    view = broker.cluster.view
    state = view.states.get((topic, partition_for(key, info.partitions)))
    registration = view.brokers.get(state.leader) if state is not None else None
    endpoint = registration.endpoint(listener) if registration is not None else None
    if endpoint is None:
        return int(ErrorCode.COORDINATOR_NOT_AVAILABLE), -1, "", -1
    return 0, registration.broker_id, endpoint.host, endpoint.port


def handle(context, request):
    broker = context.broker
    node = broker.config.node_id
    key_type = request.key_type if context.api_version >= 1 else GROUP
    code = 0 if key_type in (GROUP, TRANSACTION) else int(ErrorCode.INVALID_REQUEST)
    ok = code == 0
    keys = request.coordinator_keys if context.api_version >= 4 else [request.key]
    refused = set()
    if ok and broker.authorizer is not None:
        resource_type, refusal = _KEY_RESOURCES[key_type]
        refused = set(keys) - context.authorized_names(AclOperation.DESCRIBE, resource_type, keys)
    if broker.cluster is not None and ok:
        listener = broker.listener_name_of(context.connection)
        answers = [_cluster_coordinator(broker, key_type, key, listener) for key in keys]
    else:
        if ok and key_type == TRANSACTION and set(keys) - refused:
            # Created on first use, as Kafka's FindCoordinator does, so a client that looks up the topic's
            # partitions next (the Spark sink colocates its transactional ids with them) finds them.
            broker.transaction_coordinator.ensure_state_topic()
        host, port = broker.advertised_for(context.connection)  # the listener it came in on
        answers = [(code, node if ok else -1, host if ok else "", port if ok else -1) for _ in keys]
    if refused:
        answers = [(int(refusal), -1, "", -1) if key in refused else answer for key, answer in zip(keys, answers)]
    if context.api_version >= 4:
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
            Coordinator(key=key, node_id=n, host=h, port=p, error_code=c, error_message=None)
            for key, (c, n, h, p) in zip(keys, answers)])
    c, n, h, p = answers[0]
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=c, error_message=None, node_id=n, host=h, port=p)


def error_response(context, request, code):
    if context.api_version >= 4:
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
            Coordinator(key=key, node_id=-1, host="", port=-1, error_code=int(code), error_message=None)
            for key in request.coordinator_keys])
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=int(code), error_message=None, node_id=-1,
                                   host="", port=-1)
