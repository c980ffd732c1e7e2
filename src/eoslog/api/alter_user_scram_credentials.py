"""AlterUserScramCredentials (key 51, KIP-554): add, replace or remove users' SCRAM credentials.

The client sends a salt and the salted password (the password never crosses the wire); the broker
derives the stored and server keys (security/scram.py) and writes the store durably before answering:
the data directory's file on a single node, ZooKeeper on a cluster (cluster/user_credentials.py, after
which every broker reads the change).
Per user, all or nothing: a user named twice gets DUPLICATE_RESOURCE, an unknown mechanism
UNSUPPORTED_SASL_MECHANISM, iterations outside Kafka's bounds or a salted password of the wrong size
UNACCEPTABLE_CREDENTIAL, removing what does not exist RESOURCE_NOT_FOUND; the other users' changes
still apply. Needs ALTER on the cluster when an authorizer is configured.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import AlterUserScramCredentialsResponse
from eoslog.security.acl import AclOperation, ResourceType
from eoslog.security.credentials import check_user
from eoslog.security.scram import MECHANISM_BY_TYPE, CredentialError, ScramCredential

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import AlterUserScramCredentialsRequest

API_KEY = 51
MIN_VERSION = 0
MAX_VERSION = 0

Result = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult


class _Refused(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


async def handle(context: RequestContext, request: AlterUserScramCredentialsRequest):
    context.require(AclOperation.ALTER, ResourceType.CLUSTER)  # every user gets CLUSTER_AUTHORIZATION_FAILED
    store = context.services.credentials
    changes = [("delete", d) for d in request.deletions] + [("upsert", u) for u in request.upsertions]
    # A user may have several changes (one per mechanism), but not two for the same mechanism.
    counts = Counter((change.name, change.mechanism) for _, change in changes)
    by_user: dict[str, list] = {}
    for kind, change in changes:
        by_user.setdefault(change.name, []).append((kind, change))
    results = []
    planned: dict[str, dict] = {}  # security/credentials.py Changes
    for user, user_changes in by_user.items():
        try:
            prepared = [_prepare(kind, change, counts, store) for kind, change in user_changes]
        except _Refused as exc:
            results.append(Result(user=user, error_code=int(exc.code), error_message=str(exc)))
            continue
        planned[user] = {mechanism: credential for _, mechanism, credential in prepared}
        results.append(Result(user=user, error_code=0, error_message=None))
    if planned:
        await store.alter(planned)  # before answering: an acknowledged change survives a crash
    return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=results)


def _prepare(kind, change, counts, store):
    try:
        check_user(change.name)
    except CredentialError as exc:
        raise _Refused(ErrorCode.UNACCEPTABLE_CREDENTIAL, str(exc)) from None
    mechanism = MECHANISM_BY_TYPE.get(change.mechanism)
    if mechanism is None:
        raise _Refused(ErrorCode.UNSUPPORTED_SASL_MECHANISM, f"unknown SCRAM mechanism type {change.mechanism}")
    if counts[(change.name, change.mechanism)] > 1:
        raise _Refused(ErrorCode.DUPLICATE_RESOURCE, f"{mechanism} of user {change.name!r} is changed twice")
    if kind == "delete":
        if store.lookup(change.name, mechanism) is None:
            raise _Refused(ErrorCode.RESOURCE_NOT_FOUND, f"user {change.name!r} has no {mechanism} credential")
        return kind, mechanism, None
    try:
        credential = ScramCredential.from_salted_password(mechanism, bytes(change.salt),
                                                          bytes(change.salted_password), change.iterations)
    except CredentialError as exc:
        raise _Refused(ErrorCode.UNACCEPTABLE_CREDENTIAL, str(exc)) from None
    return kind, mechanism, credential


def error_response(context: RequestContext, request: AlterUserScramCredentialsRequest, code: ErrorCode):
    names = dict.fromkeys(c.name for c in [*request.deletions, *request.upsertions])
    return AlterUserScramCredentialsResponse(
        throttle_time_ms=0, results=[Result(user=name, error_code=int(code), error_message=code.name) for name in names])
