"""DescribeTransactionGroups (eoslog's private key 32257 = 0x7E01), v0: a transaction group's last
committed sequence and when it was committed (docs/spark.md, "Broker extension: transaction groups").
An unknown group is not an error: it answers -1."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import DescribeTransactionGroupsResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import DescribeTransactionGroupsRequest

API_KEY = 0x7E01
MIN_VERSION = 0
MAX_VERSION = 0

DescribedGroup = DescribeTransactionGroupsResponse.DescribedGroup


def handle(context: RequestContext, request: DescribeTransactionGroupsRequest):
    visible = context.authorized_names(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, request.group_names)
    described = {g.group_name: g for g in context.services.coordinators.transaction_groups.describe(
        [name for name in request.group_names if name in visible])}
    refused = int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    return DescribeTransactionGroupsResponse(throttle_time_ms=0, groups=[
        DescribedGroup(group_name=name, error_code=int(described[name].error),
                       last_committed_sequence=described[name].last_committed_sequence,
                       last_commit_timestamp_ms=described[name].last_commit_timestamp_ms) if name in described
        else DescribedGroup(group_name=name, error_code=refused, last_committed_sequence=-1,
                            last_commit_timestamp_ms=-1)
        for name in request.group_names])


def error_response(context: RequestContext, request: DescribeTransactionGroupsRequest, code: ErrorCode):
    return DescribeTransactionGroupsResponse(throttle_time_ms=0, groups=[
        DescribedGroup(group_name=name, error_code=int(code), last_committed_sequence=-1,
                       last_commit_timestamp_ms=-1) for name in request.group_names])
