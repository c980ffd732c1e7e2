"""DescribeTransactionGroups (eoslog's private key 32257 = 0x7E01), v0: a transaction group's last
committed sequence and when it was committed (docs/spark.md, "Broker extension: transaction groups").
An unknown group is not an error: it answers -1."""

from __future__ import annotations

from eoslog.protocol.messages import DescribeTransactionGroupsResponse

API_KEY = 0x7E01
MIN_VERSION = 0
MAX_VERSION = 0

DescribedGroup = DescribeTransactionGroupsResponse.DescribedGroup


def handle(context, request):
    described = context.broker.transaction_coordinator.groups.describe(request.group_names)
    return DescribeTransactionGroupsResponse(throttle_time_ms=0, groups=[
        DescribedGroup(group_name=g.group_name, error_code=int(g.error), last_committed_sequence=g.last_committed_sequence,
                       last_commit_timestamp_ms=g.last_commit_timestamp_ms) for g in described])


def error_response(context, request, code):
    return DescribeTransactionGroupsResponse(throttle_time_ms=0, groups=[
        DescribedGroup(group_name=name, error_code=int(code), last_committed_sequence=-1,
                       last_commit_timestamp_ms=-1) for name in request.group_names])
