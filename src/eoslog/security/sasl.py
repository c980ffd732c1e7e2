"""The server side of one connection's SASL exchange: a pure state machine, no I/O.

    state              request allowed                  -> next state
    HANDSHAKE          ApiVersions                      -> HANDSHAKE
                       SaslHandshake(known mechanism)   -> AUTHENTICATE
    AUTHENTICATE       SaslAuthenticate(token)          -> AUTHENTICATE (more rounds) | COMPLETE | FAILED
                       (after a v0 handshake: a bare token frame instead of SaslAuthenticate)
    COMPLETE           anything                         -> COMPLETE
                       SaslHandshake (KIP-368 re-auth)  -> REAUTHENTICATE
    REAUTHENTICATE     SaslAuthenticate(token)          -> REAUTHENTICATE | COMPLETE | FAILED
                       anything else (old session)      -> REAUTHENTICATE
    FAILED             nothing: the connection is closed after the error response

Any other request in a state is a protocol violation: the connection is closed (Kafka's
IllegalSaslStateException), since before authentication nothing else may be answered.

Mechanisms: PLAIN (RFC 4616) and SCRAM-SHA-256/512 (RFC 5802), both checked against
the salted credentials of security/credentials.py. Every failure says the same thing, whatever failed
(unknown user, wrong password, bad proof), so a client cannot probe which users exist.
Re-authentication must keep the principal (KIP-368): a different user fails and closes the connection.
"""

from __future__ import annotations

import base64
import enum
import hashlib
import hmac
import secrets
from collections.abc import Callable

from eoslog.security.scram import MECHANISMS, ScramCredential

PLAIN = "PLAIN"
SUPPORTED_MECHANISMS = (PLAIN, *MECHANISMS)
API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36


class State(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    COMPLETE = "complete"
    REAUTHENTICATE = "reauthenticate"
    FAILED = "failed"


# state -> api keys a client may send in it (None: every key)
ALLOWED = {
    State.HANDSHAKE: frozenset({API_VERSIONS, SASL_HANDSHAKE}),
    State.AUTHENTICATE: frozenset({SASL_AUTHENTICATE}),
    State.COMPLETE: None,
    State.REAUTHENTICATE: None,
    State.FAILED: frozenset(),
}


class SaslError(Exception):
    """Carries the wire error name; the handlers turn it into their response's error code."""

    error_name = "SASL_AUTHENTICATION_FAILED"


class UnsupportedMechanism(SaslError):
    error_name = "UNSUPPORTED_SASL_MECHANISM"


class IllegalState(SaslError):
    error_name = "ILLEGAL_SASL_STATE"


class AuthenticationFailed(SaslError):
    error_name = "SASL_AUTHENTICATION_FAILED"


# user -> mechanism -> credential (security/credentials.py CredentialStore.lookup)
Lookup = Callable[[str, str], "ScramCredential | None"]


class SaslSession:
    def __init__(self, enabled_mechanisms: tuple[str, ...], lookup: Lookup) -> None:
        self.enabled_mechanisms = enabled_mechanisms
        self._lookup = lookup
        self.state = State.HANDSHAKE
        self.mechanism: str | None = None
        self.principal: str | None = None  # "User:<name>" once COMPLETE
        self._exchange: _Exchange | None = None
        self.raw_tokens = False  # after a v0 handshake: bare tokens, no SaslAuthenticate (Kafka before 1.0)

    @property
    def authenticated(self) -> bool:
        return self.state in (State.COMPLETE, State.REAUTHENTICATE)

    def allows(self, api_key: int) -> bool:
        allowed = ALLOWED[self.state]
        return allowed is None or api_key in allowed

    @property
    def expects_raw_token(self) -> bool:
        return self.raw_tokens and self.state is State.AUTHENTICATE

    def handshake(self, mechanism: str, raw_tokens: bool = False) -> None:
        if self.state not in (State.HANDSHAKE, State.COMPLETE):
            raise IllegalState(f"SaslHandshake is not valid while {self.state.value}")
        if raw_tokens and self.state is State.COMPLETE:
            raise IllegalState("re-authentication needs SaslHandshake v1 and SaslAuthenticate (KIP-368)")
        if mechanism not in self.enabled_mechanisms:
            raise UnsupportedMechanism(f"{mechanism!r} is not enabled on this listener; enabled: "
                                       f"{', '.join(self.enabled_mechanisms)}")
        self.mechanism = mechanism
        self.raw_tokens = raw_tokens
        self._exchange = _Plain(self._lookup) if mechanism == PLAIN else _Scram(mechanism, self._lookup)
        self.state = State.AUTHENTICATE if self.state is State.HANDSHAKE else State.REAUTHENTICATE

    def authenticate(self, token: bytes) -> tuple[bytes, bool]:
        """One SaslAuthenticate round: (the server's token, whether authentication is complete)."""
        if self.state not in (State.AUTHENTICATE, State.REAUTHENTICATE) or self._exchange is None:
            raise IllegalState(f"SaslAuthenticate is not valid while {self.state.value}")
        try:
            reply, user = self._exchange.step(bytes(token))
        except AuthenticationFailed:
            self.state = State.FAILED
            raise
        if user is None:
            return reply, False
        principal = f"User:{user}"
        if self.state is State.REAUTHENTICATE and principal != self.principal:
            self.state = State.FAILED
            raise AuthenticationFailed(f"re-authentication must keep the principal {self.principal}")
        self.principal = principal
        self.state = State.COMPLETE
        self._exchange = None
        return reply, True

    def fail(self) -> None:
        self.state = State.FAILED


def _invalid(mechanism: str) -> AuthenticationFailed:
    return AuthenticationFailed(f"Authentication failed: invalid credentials with SASL mechanism {mechanism}")


class _Exchange:
    def step(self, token: bytes) -> tuple[bytes, str | None]:
        """The reply, and the user name once authenticated."""
        raise NotImplementedError


class _Plain(_Exchange):
    """One message: ``authzid NUL authcid NUL password``; an authzid, if given, must be the user itself."""

    def __init__(self, lookup: Lookup) -> None:
        self._lookup = lookup

    def step(self, token: bytes) -> tuple[bytes, str | None]:
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise AuthenticationFailed("PLAIN: expected authzid NUL username NUL password")
        try:
            authzid, user, password = (part.decode("utf-8") for part in parts)
        except UnicodeDecodeError:
            raise _invalid(PLAIN) from None
        if not user or (authzid and authzid != user):
            raise _invalid(PLAIN)
        # The strongest credential the user has; each was derived from the same password.
        for mechanism in reversed(MECHANISMS):
            credential = self._lookup(user, mechanism)
            if credential is not None:
                if credential.verify_password(password):
                    return b"", user
                break
        raise _invalid(PLAIN)


class _Scram(_Exchange):
    """Two rounds (RFC 5802): client-first -> server-first, client-final -> server-final, checked against
    the stored keys (security/scram.py) in constant time.

    Written here rather than taken from ``scramp`` (which the tools use as a client) for one reason:
    librdkafka before 2.6.1 (Debian's kcat, Ubuntu's librdkafka) repeats its own nonce in front of the
    combined one in client-final (librdkafka#4895). Kafka 3.x accepted that (its check was ``endsWith``),
    so we do too: the combined nonce, with our random part, must still be there, which is what stops a
    replay; the proof is checked over the message exactly as the client sent it."""

    def __init__(self, mechanism: str, lookup: Lookup) -> None:
        self._mechanism = mechanism
        self._lookup = lookup
        self._round = 0

    def step(self, token: bytes) -> tuple[bytes, str | None]:
        try:
            message = token.decode("utf-8")
        except UnicodeDecodeError:
            raise _invalid(self._mechanism) from None
        if self._round == 0:
            self._round = 1
            return self._client_first(message).encode(), None
        if self._round == 1:
            self._round = 2
            return self._client_final(message).encode(), self._user
        raise AuthenticationFailed("SCRAM: no rounds are left")

    def _client_first(self, message: str) -> str:
        gs2_flag, _, rest = message.partition(",")
        authzid, _, bare = rest.partition(",")
        if gs2_flag not in ("n", "y") or not bare:  # "p=...": channel binding, which Kafka does not use
            raise AuthenticationFailed(f"{self._mechanism}: expected a client-first message without channel binding")
        attributes = _attributes(bare)
        user = _saslname(attributes.get("n", ""))
        if not user or "r" not in attributes or attributes.get("tokenauth") == "true":
            raise _invalid(self._mechanism)  # delegation tokens are not served
        if authzid and _saslname(authzid.removeprefix("a=")) != user:
            raise _invalid(self._mechanism)
        credential = self._lookup(user, self._mechanism)
        if credential is None:
            raise _invalid(self._mechanism)
        self._user, self._credential = user, credential
        self._gs2_header = message[:len(message) - len(bare)]
        self._client_nonce = attributes["r"]
        self._nonce = self._client_nonce + secrets.token_urlsafe(24)
        self._client_first_bare = bare
        self._server_first = (f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},"
                              f"i={credential.iterations}")
        return self._server_first

    def _client_final(self, message: str) -> str:
        without_proof, sep, proof_text = message.rpartition(",p=")
        attributes = _attributes(without_proof)
        if not sep or attributes.get("c") != base64.b64encode(self._gs2_header.encode()).decode():
            raise _invalid(self._mechanism)
        if attributes.get("r") not in (self._nonce, self._client_nonce + self._nonce):
            raise _invalid(self._mechanism)
        try:
            proof = base64.b64decode(proof_text, validate=True)
        except ValueError:
            raise _invalid(self._mechanism) from None
        credential = self._credential
        digest = MECHANISMS[self._mechanism][0]
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = hmac.digest(credential.stored_key, auth_message, digest)
        if len(proof) != len(signature):
            raise _invalid(self._mechanism)
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not hmac.compare_digest(hashlib.new(digest, client_key).digest(), credential.stored_key):
            raise _invalid(self._mechanism)
        server_signature = hmac.digest(credential.server_key, auth_message, digest)
        return "v=" + base64.b64encode(server_signature).decode()


def _attributes(text: str) -> dict[str, str]:
    """``a=1,b=2`` -> {"a": "1", "b": "2"} (values may contain '=', never ',')."""
    result = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep:
            raise AuthenticationFailed(f"SCRAM: malformed attribute {item!r}")
        result[key] = value
    return result


def _saslname(text: str) -> str:
    """RFC 5802's escaping of ',' and '=' in user names."""
    return text.replace("=2C", ",").replace("=3D", "=")
