"""ListTransactionGroups (eoslog's private key 32259 = 0x7E03), v0: every transaction group this broker
coordinates, with its state, last committed sequence and the members of that commit (docs/spark.md,
"Broker extension: transaction groups"). Like ListTransactions it filters rather than refuses: groups and
members the principal may not Describe (as a transactional id, as DescribeTransactionGroups checks) are
left out. On a cluster each broker answers for the groups of the partitions it coordinates."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.coordinator.transaction_groups.log_format import GroupState
from eoslog.protocol.messages import ListTransactionGroupsResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.errors import ErrorCode
    from eoslog.protocol.messages import ListTransactionGroupsRequest

API_KEY = 0x7E03
MIN_VERSION = 0
MAX_VERSION = 0

ListedGroup = ListTransactionGroupsResponse.ListedGroup
ListedMember = ListedGroup.ListedMember
# The names on the wire, in Kafka's spelling of the matching transaction states
STATE_NAMES = {GroupState.PREPARE_COMMIT: "PrepareCommit", GroupState.COMPLETE_COMMIT: "CompleteCommit"}


def handle(context: RequestContext, request: ListTransactionGroupsRequest):
    unknown = [s for s in request.states_filter if s not in STATE_NAMES.values()]
    wanted = set(request.states_filter) - set(unknown)
    listed = [] if unknown and not wanted else [
        (record, busy) for record, busy in context.services.coordinators.transaction_groups.listing()
        if not wanted or STATE_NAMES[record.state] in wanted]
    names = {r.group_name for r, _ in listed} | {m.transactional_id for r, _ in listed for m in r.members}
    visible = context.authorized_names(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, names)
    return ListTransactionGroupsResponse(
        throttle_time_ms=0, error_code=0, unknown_state_filters=unknown,
        groups=[ListedGroup(group_name=record.group_name, state=STATE_NAMES[record.state], decision_in_flight=busy,
                            last_committed_sequence=record.sequence, last_commit_timestamp_ms=record.timestamp_ms,
                            members=[ListedMember(transactional_id=m.transactional_id, producer_id=m.producer_id,
                                                  producer_epoch=m.producer_epoch)
                                     for m in record.members if m.transactional_id in visible])
                for record, busy in listed if record.group_name in visible])


def error_response(context: RequestContext, request: ListTransactionGroupsRequest, code: ErrorCode):
    return ListTransactionGroupsResponse(throttle_time_ms=0, error_code=int(code), unknown_state_filters=[],
                                         groups=[])
