"""FindCoordinator (key 10), v0-4: a single node coordinates every group and every transactional id.

Written with the transaction coordinator (transactional producers cannot start without it); key type 0
(groups) gets the same answer, which is right as soon as the group APIs are served. v4 batches keys
(KIP-699); v5-6 only add error codes for newer coordinator types and are not advertised."""

from __future__ import annotations

from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import FindCoordinatorResponse

API_KEY = 10
MIN_VERSION = 0
MAX_VERSION = 4

GROUP, TRANSACTION = 0, 1
Coordinator = FindCoordinatorResponse.Coordinator


def handle(context, request):
    broker = context.broker
    host, port = broker.config.advertised
    node = broker.config.node_id
    key_type = request.key_type if context.api_version >= 1 else GROUP
    code = 0 if key_type in (GROUP, TRANSACTION) else int(ErrorCode.INVALID_REQUEST)
    ok = code == 0
    if context.api_version >= 4:
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
            Coordinator(key=key, node_id=node if ok else -1, host=host if ok else "", port=port if ok else -1,
                        error_code=code, error_message=None) for key in request.coordinator_keys])
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=code, error_message=None,
                                   node_id=node if ok else -1, host=host if ok else "", port=port if ok else -1)


def error_response(context, request, code):
    if context.api_version >= 4:
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
            Coordinator(key=key, node_id=-1, host="", port=-1, error_code=int(code), error_message=None)
            for key in request.coordinator_keys])
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=int(code), error_message=None, node_id=-1,
                                   host="", port=-1)
