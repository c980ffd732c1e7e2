"""DeleteAcls (key 31), v1-3: removes the ACL bindings each filter matches and reports them. Needs
ALTER on the cluster."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.protocol.errors import ErrorCode, SecurityDisabledError
from eoslog.protocol.messages import DeleteAclsResponse
from eoslog.security.acl import AclBindingFilter, AclOperation, InvalidAclError, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import DeleteAclsRequest

API_KEY = 31
MIN_VERSION = 1
MAX_VERSION = 3

FilterResult = DeleteAclsResponse.DeleteAclsFilterResult
Matching = DeleteAclsResponse.DeleteAclsMatchingAcl


def handle(context: RequestContext, request: DeleteAclsRequest):
    authorizer = context.services.authorizer
    if not authorizer.keeps_acls:  # no authorizer.class.name: nowhere to keep them
        raise SecurityDisabledError("no authorizer is configured (authorizer.class.name)")
    context.require(AclOperation.ALTER, ResourceType.CLUSTER)
    filters: list[AclBindingFilter | str] = []
    for f in request.filters:
        try:
            filters.append(AclBindingFilter.of(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter,
                                               f.principal_filter, f.host_filter, f.operation, f.permission_type))
        except InvalidAclError as exc:
            filters.append(str(exc))
    return _delete(authorizer, filters)


async def _delete(authorizer, filters):
    valid = [f for f in filters if isinstance(f, AclBindingFilter)]
    removed = iter(await authorizer.delete(valid))
    results = []
    for f in filters:
        if isinstance(f, str):
            results.append(FilterResult(error_code=int(ErrorCode.INVALID_REQUEST), error_message=f, matching_acls=[]))
            continue
        results.append(FilterResult(error_code=0, error_message=None, matching_acls=[
            Matching(error_code=0, error_message=None, resource_type=int(b.pattern.resource_type),
                     resource_name=b.pattern.name, pattern_type=int(b.pattern.pattern_type),
                     principal=b.entry.principal, host=b.entry.host, operation=int(b.entry.operation),
                     permission_type=int(b.entry.permission_type))
            for b in next(removed)]))
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=results)


def error_response(context: RequestContext, request: DeleteAclsRequest, code: ErrorCode):
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
        FilterResult(error_code=int(code), error_message=None, matching_acls=[]) for _ in request.filters])
