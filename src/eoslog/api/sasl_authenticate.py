"""SaslAuthenticate (key 36), v0-2: one round of the SASL exchange the handshake chose (security/sasl.py).

On success the connection takes the user's principal; with ``connections.max.reauth.ms`` set, v1+ tells
the client how long its session lasts (KIP-368) and the connection enforces the end. A failure answers
SASL_AUTHENTICATION_FAILED with the reason, then closes the connection.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import SaslAuthenticateResponse
from eoslog.security.sasl import PLAIN, SaslError

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import SaslAuthenticateRequest

API_KEY = 36
MIN_VERSION = 0
MAX_VERSION = 2

log = logging.getLogger(__name__)


def handle(context: RequestContext, request: SaslAuthenticateRequest):
    connection = context.connection
    session = connection.sasl
    if session is None:
        return _refusal(ErrorCode.ILLEGAL_SASL_STATE, "this listener does not use SASL")
    renewing = session.authenticated  # a handshake on an authenticated connection: KIP-368 re-authentication
    token = bytes(request.auth_bytes)
    if session.mechanism == PLAIN:
        # PLAIN derives the salted password (PBKDF2, ~5 ms): in a thread, so a burst of logins cannot
        # stall everyone else's requests; hashlib releases the GIL while it works.
        return _in_thread(connection, session, token, renewing)
    return _respond(connection, session, renewing, _attempt(session, token))


async def _in_thread(connection, session, token: bytes, renewing: bool):
    release = connection.hold()  # nothing else of this connection is dispatched meanwhile
    try:
        outcome = await asyncio.to_thread(_attempt, session, token)
    finally:
        release()
    return _respond(connection, session, renewing, outcome)


def _attempt(session, token: bytes):
    try:
        return session.authenticate(token)
    except SaslError as exc:
        return exc


def _respond(connection, session, renewing: bool, outcome) -> SaslAuthenticateResponse:
    if isinstance(outcome, SaslError):
        log.info("SASL authentication from %s failed: %s", connection.peer, outcome)
        session.fail()
        connection.close_after_response()
        return _refusal(ErrorCode[outcome.error_name], str(outcome))
    reply, done = outcome
    lifetime_ms = complete(connection, session, renewing) if done else 0
    return SaslAuthenticateResponse(error_code=0, error_message=None, auth_bytes=reply,
                                    session_lifetime_ms=lifetime_ms)


def complete(connection, session, renewing: bool) -> int:
    """The exchange succeeded: the connection takes the principal and its session's lifetime (ms, 0: none)."""
    lifetime_ms = connection.reauth_ms
    connection.authenticated(session.principal, lifetime_ms / 1000 if lifetime_ms else None)
    if renewing:
        log.info("%s re-authenticated as %s with %s", connection.peer, session.principal, session.mechanism)
    else:
        log.debug("%s authenticated as %s with %s", connection.peer, session.principal, session.mechanism)
    return lifetime_ms


def _refusal(code: ErrorCode, message: str) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(error_code=int(code), error_message=message, auth_bytes=b"",
                                    session_lifetime_ms=0)
