"""DescribeTransactions (key 65, KIP-664), v0: state, timeout, start time, producer and partitions of
transactional ids."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import DescribeTransactionsResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import DescribeTransactionsRequest

API_KEY = 65
MIN_VERSION = 0
MAX_VERSION = 0

Entry = DescribeTransactionsResponse.TransactionState
TopicData = DescribeTransactionsResponse.TopicData


def _error(transactional_id: str, code: int) -> Entry:
    return Entry(error_code=code, transactional_id=transactional_id, transaction_state="",
                 transaction_timeout_ms=0, transaction_start_time_ms=-1, producer_id=-1, producer_epoch=-1,
                 topics=[])


def handle(context: RequestContext, request: DescribeTransactionsRequest):
    coordinator = context.services.coordinators.transactions
    entries = []
    # Brokers verifying a transaction for KIP-890 ask here too: CLUSTER_ACTION covers every id.
    for_cluster = context.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER)
    for transactional_id in request.transactional_ids:
        if not for_cluster and not context.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                                     transactional_id):
            entries.append(_error(transactional_id, int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)))
            continue
        not_here = coordinator.ownership_error(transactional_id)
        if not_here is not None:  # a cluster: the id's coordinator is another broker (or still loading)
            entries.append(_error(transactional_id, int(not_here)))
            continue
        found = coordinator.describe(transactional_id)
        if found is None:
            entries.append(_error(transactional_id, int(ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)))
            continue
        topics: dict[str, list[int]] = {}
        for tp in found.topic_partitions:
            topics.setdefault(tp.topic, []).append(tp.partition)
        if not for_cluster:
            # The partitions of topics the principal may not Describe are left out, as Kafka does.
            visible = context.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, topics)
            topics = {name: parts for name, parts in topics.items() if name in visible}
        entries.append(Entry(
            error_code=0, transactional_id=transactional_id, transaction_state=found.state.kafka_name,
            transaction_timeout_ms=found.txn_timeout_ms, transaction_start_time_ms=found.txn_start_timestamp,
            producer_id=found.producer_id, producer_epoch=found.producer_epoch,
            topics=[TopicData(topic=name, partitions=parts) for name, parts in topics.items()]))
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=entries)


def error_response(context: RequestContext, request: DescribeTransactionsRequest, code: ErrorCode):
    return DescribeTransactionsResponse(throttle_time_ms=0,
                                        transaction_states=[_error(t, int(code)) for t in request.transactional_ids])
