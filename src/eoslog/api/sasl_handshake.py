"""SaslHandshake (key 17), v0-1: the client names its mechanism; the first step of SASL (security/sasl.py).

After v1 the exchange travels in SaslAuthenticate requests. After v0 (Kafka before 1.0) the next frames
are the mechanism's bare tokens, answered with bare tokens: the dispatcher hands them to
:func:`raw_token`. (librdkafka 2.0 also needs v0 advertised before it will do SASL at all, though it
then uses v1.) On a listener without SASL, or in the wrong
state, the answer is ILLEGAL_SASL_STATE; an unknown mechanism gets UNSUPPORTED_SASL_MECHANISM with the
enabled ones, and in both cases the connection closes after the response, as Kafka's does.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import SaslHandshakeResponse
from eoslog.security.sasl import SaslError

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import SaslHandshakeRequest

API_KEY = 17
MIN_VERSION = 0
MAX_VERSION = 1

log = logging.getLogger(__name__)


def handle(context: RequestContext, request: SaslHandshakeRequest):
    session = context.connection.sasl
    if session is None:
        return SaslHandshakeResponse(error_code=int(ErrorCode.ILLEGAL_SASL_STATE), mechanisms=[])
    try:
        session.handshake(request.mechanism, raw_tokens=context.api_version == 0)
    except SaslError as exc:
        log.info("SASL handshake from %s refused: %s", context.connection.peer, exc)
        session.fail()
        context.connection.close_after_response()
        return SaslHandshakeResponse(error_code=int(ErrorCode[exc.error_name]),
                                     mechanisms=list(session.enabled_mechanisms))
    return SaslHandshakeResponse(error_code=0, mechanisms=list(session.enabled_mechanisms))


def raw_token(connection, frame: bytes) -> list[bytes]:
    """One bare SASL token after a v0 handshake, answered with a bare token (size-prefixed, no header).
    v0 has no way to say why authentication failed: the connection is closed."""
    import struct

    from eoslog.api.errors import CloseConnection
    from eoslog.api.sasl_authenticate import complete

    session = connection.sasl
    try:
        reply, done = session.authenticate(bytes(frame))
    except SaslError as exc:
        log.info("SASL authentication from %s failed: %s", connection.peer, exc)
        raise CloseConnection() from exc
    if done:
        complete(connection, session, renewing=False)
    return [struct.pack(">i", len(reply)) + reply]
