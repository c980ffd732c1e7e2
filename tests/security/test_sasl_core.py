"""The pure SASL and SCRAM cores (security/sasl.py, security/scram.py, security/credentials.py), with
``scramp`` as an independent SCRAM client. The same exchanges run against a broker, with four real
clients, in tests/interop/test_sasl.py."""

from __future__ import annotations

import base64

import pytest
import scramp

from eoslog.security.credentials import CredentialStore, decode, encode
from eoslog.security.sasl import (
    API_VERSIONS,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    AuthenticationFailed,
    IllegalState,
    SaslSession,
    State,
    UnsupportedMechanism,
)
from eoslog.security.scram import CredentialError, ScramCredential, salted_password

ALL = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@pytest.fixture
def store() -> CredentialStore:
    store = CredentialStore()
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        store.upsert("alice", ScramCredential.from_password(mechanism, "secret", iterations=4096))
        store.upsert("a,b=c", ScramCredential.from_password(mechanism, "odd", iterations=4096))
    return store


def scram_login(session: SaslSession, mechanism: str, user: str, password: str, legacy_nonce: bool = False) -> bytes:
    client = scramp.ScramClient([mechanism], user, password)
    first = client.get_client_first()
    reply, done = session.authenticate(first.encode())
    assert not done
    client.set_server_first(reply.decode())
    final = client.get_client_final()
    if legacy_nonce:  # librdkafka < 2.6.1: its own nonce again in front of the combined one
        client_nonce = first.split("r=", 1)[1]
        final = final.replace("r=", "r=" + client_nonce, 1)
        # scramp computed its proof over the message without the repetition; recompute over what is sent.
        without_proof = final.rsplit(",p=", 1)[0]
        # The attributes by name: a nonce may itself hold "s=" (a client nonce's base64 padding before
        # the server's part), so searching the whole message for "s=" found the wrong place.
        attributes = dict(part.split("=", 1) for part in reply.decode().split(","))
        credential_salt = base64.b64decode(attributes["s"])
        iterations = int(attributes["i"])
        import hashlib
        import hmac
        digest = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
        salted = salted_password(mechanism, password, credential_salt, iterations)
        client_key = hmac.digest(salted, b"Client Key", digest)
        auth = f"{first[3:]},{reply.decode()},{without_proof}".encode()
        signature = hmac.digest(hashlib.new(digest, client_key).digest(), auth, digest)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        final = f"{without_proof},p={base64.b64encode(proof).decode()}"
        reply, done = session.authenticate(final.encode())
        assert done
        return reply
    reply, done = session.authenticate(final.encode())
    assert done
    client.set_server_final(reply.decode())  # scramp checks our server signature
    return reply


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_logs_in_with_the_right_password_and_proves_the_server(store, mechanism):
    session = SaslSession(ALL, store.lookup)
    assert session.allows(API_VERSIONS) and session.allows(SASL_HANDSHAKE) and not session.allows(3)
    session.handshake(mechanism)
    assert session.state is State.AUTHENTICATE and not session.allows(SASL_HANDSHAKE) and not session.allows(3)
    scram_login(session, mechanism, "alice", "secret")
    assert session.state is State.COMPLETE and session.principal == "User:alice" and session.allows(3)


def test_scram_escaped_user_names_and_librdkafkas_repeated_nonce_are_understood(store):
    session = SaslSession(ALL, store.lookup)
    session.handshake("SCRAM-SHA-256")
    scram_login(session, "SCRAM-SHA-256", "a,b=c", "odd")
    assert session.principal == "User:a,b=c"
    session = SaslSession(ALL, store.lookup)
    session.handshake("SCRAM-SHA-512")
    scram_login(session, "SCRAM-SHA-512", "alice", "secret", legacy_nonce=True)
    assert session.principal == "User:alice"


@pytest.mark.parametrize("user,password", [("alice", "wrong"), ("nobody", "secret")])
@pytest.mark.parametrize("mechanism", ALL)
def test_every_failure_says_the_same_and_ends_the_session(store, mechanism, user, password):
    session = SaslSession(ALL, store.lookup)
    session.handshake(mechanism)
    with pytest.raises(AuthenticationFailed, match="invalid credentials") as failure:
        if mechanism == "PLAIN":
            session.authenticate(f"\0{user}\0{password}".encode())
        else:
            scram_login(session, mechanism, user, password)
    assert str(failure.value) == f"Authentication failed: invalid credentials with SASL mechanism {mechanism}"
    assert session.state is State.FAILED and not session.allows(API_VERSIONS) and not session.allows(3)


def test_scram_refuses_tampered_nonces_channel_binding_and_delegation_tokens(store):
    def started(first: str) -> SaslSession:
        session = SaslSession(ALL, store.lookup)
        session.handshake("SCRAM-SHA-256")
        session.authenticate(first.encode())
        return session

    with pytest.raises(AuthenticationFailed):
        started("p=tls-unique,,n=alice,r=abc")
    with pytest.raises(AuthenticationFailed):
        started("n,,n=alice,r=abc,tokenauth=true")
    session = started("n,,n=alice,r=abc")
    with pytest.raises(AuthenticationFailed):
        session.authenticate(b"c=biws,r=abcSOMETHINGELSE,p=" + base64.b64encode(b"x" * 32))
    with pytest.raises(IllegalState):
        session.authenticate(b"anything")  # FAILED: nothing more


def test_plain_checks_the_salted_credential_and_the_authorization_id(store):
    session = SaslSession(ALL, store.lookup)
    session.handshake("PLAIN")
    assert session.authenticate(b"alice\0alice\0secret") == (b"", True)
    session = SaslSession(ALL, store.lookup)
    session.handshake("PLAIN")
    with pytest.raises(AuthenticationFailed):
        session.authenticate(b"admin\0alice\0secret")  # acting as someone else
    session = SaslSession(ALL, store.lookup)
    session.handshake("PLAIN")
    with pytest.raises(AuthenticationFailed):
        session.authenticate(b"just-garbage")


def test_handshake_rules_and_reauthentication_keeps_the_principal(store):
    session = SaslSession(("SCRAM-SHA-512",), store.lookup)
    with pytest.raises(UnsupportedMechanism, match="SCRAM-SHA-512"):
        session.handshake("PLAIN")
    with pytest.raises(IllegalState):
        session.authenticate(b"n,,n=alice,r=x")  # before any handshake
    session.handshake("SCRAM-SHA-512")
    with pytest.raises(IllegalState):
        session.handshake("SCRAM-SHA-512")  # twice
    scram_login(session, "SCRAM-SHA-512", "alice", "secret")
    # KIP-368: a new handshake on an authenticated connection; requests go on meanwhile.
    session.handshake("SCRAM-SHA-512")
    assert session.state is State.REAUTHENTICATE and session.authenticated and session.allows(3)
    assert session.allows(SASL_AUTHENTICATE)
    scram_login(session, "SCRAM-SHA-512", "alice", "secret")
    assert session.state is State.COMPLETE
    with pytest.raises(IllegalState, match="KIP-368"):
        session.handshake("SCRAM-SHA-512", raw_tokens=True)  # re-authentication needs SaslAuthenticate
    store.upsert("bob", ScramCredential.from_password("SCRAM-SHA-512", "pw", iterations=4096))
    session.handshake("SCRAM-SHA-512")
    with pytest.raises(AuthenticationFailed, match="keep the principal"):
        scram_login(session, "SCRAM-SHA-512", "bob", "pw")
    assert session.state is State.FAILED


def test_credentials_round_trip_in_kafkas_text_and_never_hold_the_password(tmp_path):
    credential = ScramCredential.from_password("SCRAM-SHA-512", "p@ss", iterations=4096)
    assert ScramCredential.from_kafka_string("SCRAM-SHA-512", credential.to_kafka_string()) == credential
    assert credential.verify_password("p@ss") and not credential.verify_password("p@sS")
    store = CredentialStore(tmp_path / "c.json")
    store.upsert("u", credential)
    store.save()
    assert b"p@ss" not in (tmp_path / "c.json").read_bytes()
    assert decode(encode({"u": {"SCRAM-SHA-512": credential}})) == {"u": {"SCRAM-SHA-512": credential}}
    assert CredentialStore.open(tmp_path).lookup("u", "SCRAM-SHA-512") is None  # another file name
    assert store.delete("u", "SCRAM-SHA-512") and not store.delete("u", "SCRAM-SHA-512") and store.users() == []


@pytest.mark.parametrize("mechanism,salt,salted,iterations,message", [
    ("SCRAM-SHA-1", b"s", b"x" * 20, 4096, "unknown SCRAM mechanism"),
    ("SCRAM-SHA-256", b"s", b"x" * 32, 1000, "iterations"),
    ("SCRAM-SHA-256", b"s", b"x" * 32, 100_000, "iterations"),
    ("SCRAM-SHA-256", b"", b"x" * 32, 4096, "salt"),
    ("SCRAM-SHA-512", b"s", b"x" * 32, 4096, "64 bytes"),
])
def test_unacceptable_credentials_are_refused(mechanism, salt, salted, iterations, message):
    with pytest.raises(CredentialError, match=message):
        ScramCredential.from_salted_password(mechanism, salt, salted, iterations)
    with pytest.raises(CredentialError):
        decode(b'{"version": 1, "users": {"u": {"SCRAM-SHA-256": "salt=!!,stored_key=,server_key=,iterations=x"}}}')
