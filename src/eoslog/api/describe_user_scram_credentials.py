"""DescribeUserScramCredentials (key 50, KIP-554): each user's SCRAM mechanisms and iterations (never the
keys). No users named: every user with a credential. A named user without one: RESOURCE_NOT_FOUND; a
user named twice: DUPLICATE_RESOURCE. Needs DESCRIBE on the cluster when an authorizer is configured."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import DescribeUserScramCredentialsResponse
from eoslog.security.acl import AclOperation, ResourceType
from eoslog.security.scram import MECHANISMS

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import DescribeUserScramCredentialsRequest

API_KEY = 50
MIN_VERSION = 0
MAX_VERSION = 0

Result = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
Info = DescribeUserScramCredentialsResponse.CredentialInfo


def handle(context: RequestContext, request: DescribeUserScramCredentialsRequest):
    context.require(AclOperation.DESCRIBE, ResourceType.CLUSTER)  # as Kafka: who may see the users
    store = context.services.credentials
    if request.users:
        names = [user.name for user in request.users]
    else:
        names = store.users()
    counts = Counter(names)
    results = []
    for name in dict.fromkeys(names):
        if counts[name] > 1:
            results.append(Result(user=name, error_code=int(ErrorCode.DUPLICATE_RESOURCE),
                                  error_message=f"user {name!r} is listed more than once", credential_infos=[]))
            continue
        credentials = store.credentials_of(name)
        if not credentials:
            results.append(Result(user=name, error_code=int(ErrorCode.RESOURCE_NOT_FOUND),
                                  error_message=f"user {name!r} has no SCRAM credential", credential_infos=[]))
            continue
        results.append(Result(user=name, error_code=0, error_message=None, credential_infos=[
            Info(mechanism=MECHANISMS[mechanism][1], iterations=credential.iterations)
            for mechanism, credential in sorted(credentials.items())]))
    return DescribeUserScramCredentialsResponse(throttle_time_ms=0, error_code=0, error_message=None,
                                                results=results)


def error_response(context: RequestContext, request: DescribeUserScramCredentialsRequest, code: ErrorCode):
    return DescribeUserScramCredentialsResponse(throttle_time_ms=0, error_code=int(code), error_message=code.name,
                                                results=[])
