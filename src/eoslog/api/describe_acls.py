"""DescribeAcls (key 29), v1-3: the ACL bindings a filter matches, grouped by resource pattern. Needs
DESCRIBE on the cluster."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.protocol.errors import ErrorCode, SecurityDisabledError
from eoslog.protocol.messages import DescribeAclsResponse
from eoslog.security.acl import AclBindingFilter, AclOperation, InvalidAclError, ResourceType
from eoslog.security.acl_format import group_by_pattern

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import DescribeAclsRequest

API_KEY = 29
MIN_VERSION = 1
MAX_VERSION = 3

Resource = DescribeAclsResponse.DescribeAclsResource
Description = DescribeAclsResponse.AclDescription


def handle(context: RequestContext, request: DescribeAclsRequest):
    authorizer = context.services.authorizer
    if not authorizer.keeps_acls:  # no authorizer.class.name: nowhere to keep them
        raise SecurityDisabledError("no authorizer is configured (authorizer.class.name)")
    context.require(AclOperation.DESCRIBE, ResourceType.CLUSTER)
    try:
        acl_filter = AclBindingFilter.of(request.resource_type_filter, request.resource_name_filter,
                                         request.pattern_type_filter, request.principal_filter, request.host_filter,
                                         request.operation, request.permission_type)
    except InvalidAclError as exc:
        return DescribeAclsResponse(throttle_time_ms=0, error_code=int(ErrorCode.INVALID_REQUEST),
                                    error_message=str(exc), resources=[])
    resources = [
        Resource(resource_type=int(pattern.resource_type), resource_name=pattern.name,
                 pattern_type=int(pattern.pattern_type), acls=[
                     Description(principal=e.principal, host=e.host, operation=int(e.operation),
                                 permission_type=int(e.permission_type)) for e in entries])
        for pattern, entries in group_by_pattern(authorizer.describe(acl_filter)).items()]
    return DescribeAclsResponse(throttle_time_ms=0, error_code=0, error_message=None, resources=resources)


def error_response(context: RequestContext, request: DescribeAclsRequest, code: ErrorCode):
    return DescribeAclsResponse(throttle_time_ms=0, error_code=int(code), error_message=code.description, resources=[])
