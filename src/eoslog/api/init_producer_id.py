"""InitProducerId (key 22): a producer id for an idempotent producer, or the transactional id's producer
id and bumped epoch (KIP-98, KIP-360 recovery from v3, PRODUCER_FENCED from v4 per KIP-588).

v5+ belong to KIP-890 part 2 / KIP-939 and are not advertised."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.protocol.errors import ClusterAuthorizationFailedError
from eoslog.protocol.messages import InitProducerIdResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.errors import ErrorCode
    from eoslog.protocol.messages import InitProducerIdRequest

API_KEY = 22
MIN_VERSION = 0
MAX_VERSION = 4


async def _handle(context, request):
    coordinator = context.services.coordinators.transactions
    producer_id = request.producer_id if context.api_version >= 3 else -1
    producer_epoch = request.producer_epoch if context.api_version >= 3 else -1
    code, producer_id, producer_epoch = await coordinator.init_producer_id(
        request.transactional_id, request.transaction_timeout_ms, producer_id, producer_epoch, context.api_version)
    return InitProducerIdResponse(throttle_time_ms=0, error_code=int(code), producer_id=producer_id,
                                  producer_epoch=producer_epoch)


def handle(context: RequestContext, request: InitProducerIdRequest):
    if request.transactional_id is not None:
        context.require(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id)
    elif not (context.authorize(AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER)
              or context.authorize_any(AclOperation.WRITE, ResourceType.TOPIC)):
        # An idempotent producer: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic (Kafka 2.8+).
        raise ClusterAuthorizationFailedError("an idempotent producer needs IDEMPOTENT_WRITE on the cluster "
                                              "or WRITE on a topic")
    return _handle(context, request)


def error_response(context: RequestContext, request: InitProducerIdRequest, code: ErrorCode):
    return InitProducerIdResponse(throttle_time_ms=0, error_code=int(code), producer_id=-1, producer_epoch=-1)
