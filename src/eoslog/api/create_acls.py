"""CreateAcls (key 30), v1-3: stores ACL bindings (security/). Needs ALTER on the cluster.

Each creation gets its own result: a malformed binding is refused alone (INVALID_REQUEST), the others are
stored. Without an authorizer there is nowhere to keep ACLs: SECURITY_DISABLED, as Kafka answers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.protocol.errors import ErrorCode, SecurityDisabledError
from eoslog.protocol.messages import CreateAclsResponse
from eoslog.security.acl import AclBinding, AclOperation, InvalidAclError, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import CreateAclsRequest

API_KEY = 30
MIN_VERSION = 1
MAX_VERSION = 3

Result = CreateAclsResponse.AclCreationResult


def handle(context: RequestContext, request: CreateAclsRequest):
    authorizer = context.services.authorizer
    if not authorizer.keeps_acls:  # no authorizer.class.name: nowhere to keep them
        raise SecurityDisabledError("no authorizer is configured (authorizer.class.name)")
    context.require(AclOperation.ALTER, ResourceType.CLUSTER)
    outcomes: list[tuple[int, str | None] | AclBinding] = []
    for creation in request.creations:
        try:
            outcomes.append(AclBinding.of(creation.resource_type, creation.resource_name,
                                          creation.resource_pattern_type, creation.principal, creation.host,
                                          creation.operation, creation.permission_type))
        except InvalidAclError as exc:
            outcomes.append((int(ErrorCode.INVALID_REQUEST), str(exc)))
    return _create(authorizer, outcomes)


async def _create(authorizer, outcomes):
    bindings = [o for o in outcomes if isinstance(o, AclBinding)]
    if bindings:
        await authorizer.create(bindings)  # a storage failure fails the request (error_response)
    return CreateAclsResponse(throttle_time_ms=0, results=[
        Result(error_code=0, error_message=None) if isinstance(o, AclBinding)
        else Result(error_code=o[0], error_message=o[1]) for o in outcomes])


def error_response(context: RequestContext, request: CreateAclsRequest, code: ErrorCode):
    return CreateAclsResponse(throttle_time_ms=0, results=[
        Result(error_code=int(code), error_message=None) for _ in request.creations])
