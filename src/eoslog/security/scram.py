"""SCRAM credentials (RFC 5802, RFC 7677) as Kafka keeps them.

A credential is what the server needs to check a SCRAM proof without knowing the password:
``salt``, ``iterations``, ``StoredKey = H(HMAC(SaltedPassword, "Client Key"))`` and
``ServerKey = HMAC(SaltedPassword, "Server Key")``, where ``SaltedPassword = PBKDF2(password, salt,
iterations)``. Kafka writes one as ``salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=N``
and numbers the mechanisms 1 (SCRAM-SHA-256) and 2 (SCRAM-SHA-512) on the wire
(Describe/AlterUserScramCredentials); both forms are here, and nowhere else.

The same credential verifies a PLAIN password: derive the salted password with the stored salt and
iterations and compare the StoredKey it gives, in constant time. So PLAIN needs no password kept either.
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass

# mechanism name -> (hash name, Kafka's wire number)
MECHANISMS = {"SCRAM-SHA-256": ("sha256", 1), "SCRAM-SHA-512": ("sha512", 2)}
MECHANISM_BY_TYPE = {number: name for name, (_, number) in MECHANISMS.items()}
# Kafka's bounds (ScramMechanism.minIterations / maxIterations): fewer is weak, more is a way to make the
# broker burn CPU on every login.
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 8192
SALT_BYTES = 32


class CredentialError(ValueError):
    """An unknown mechanism, iterations out of bounds, or a credential that does not parse."""


def _hash(mechanism: str) -> str:
    try:
        return MECHANISMS[mechanism][0]
    except KeyError:
        raise CredentialError(f"unknown SCRAM mechanism {mechanism!r}; known: {', '.join(MECHANISMS)}") from None


def check_iterations(iterations: int) -> None:
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise CredentialError(f"iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}, got {iterations}")


@dataclass(frozen=True)
class ScramCredential:
    mechanism: str
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_salted_password(cls, mechanism: str, salt: bytes, salted_password: bytes,
                             iterations: int) -> ScramCredential:
        """What AlterUserScramCredentials carries: the client salts and iterates, the broker keys."""
        # hashlib and hmac are imported where a key is computed: the broker reads its credentials at every
        # start, and most brokers never compute one.
        import hashlib
        import hmac

        name = _hash(mechanism)
        check_iterations(iterations)
        if not salt:
            raise CredentialError("the salt is empty")
        if len(salted_password) != hashlib.new(name).digest_size:
            raise CredentialError(f"a {mechanism} salted password is {hashlib.new(name).digest_size} bytes, "
                                  f"got {len(salted_password)}")
        client_key = hmac.digest(salted_password, b"Client Key", name)
        return cls(mechanism, bytes(salt), hashlib.new(name, client_key).digest(),
                   hmac.digest(salted_password, b"Server Key", name), iterations)

    @classmethod
    def from_password(cls, mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS,
                      salt: bytes | None = None) -> ScramCredential:
        salt = os.urandom(SALT_BYTES) if salt is None else salt
        return cls.from_salted_password(mechanism, salt, salted_password(mechanism, password, salt, iterations),
                                        iterations)

    def verify_password(self, password: str) -> bool:
        """PLAIN's check against this credential."""
        expected = ScramCredential.from_salted_password(
            self.mechanism, self.salt, salted_password(self.mechanism, password, self.salt, self.iterations),
            self.iterations)
        import hmac

        return hmac.compare_digest(expected.stored_key, self.stored_key)

    def to_kafka_string(self) -> str:
        def b64(data: bytes) -> str:
            return base64.b64encode(data).decode()

        return (f"salt={b64(self.salt)},stored_key={b64(self.stored_key)},server_key={b64(self.server_key)},"
                f"iterations={self.iterations}")

    @classmethod
    def from_kafka_string(cls, mechanism: str, text: str) -> ScramCredential:
        _hash(mechanism)
        fields = {}
        for item in text.split(","):
            key, sep, value = item.partition("=")
            if not sep:
                raise CredentialError(f"a {mechanism} credential: expected key=value items, got {item!r}")
            fields[key.strip()] = value.strip()
        try:
            return cls(mechanism, base64.b64decode(fields["salt"], validate=True),
                       base64.b64decode(fields["stored_key"], validate=True),
                       base64.b64decode(fields["server_key"], validate=True), int(fields["iterations"]))
        except (KeyError, ValueError) as exc:
            raise CredentialError(f"a {mechanism} credential does not parse: {exc}") from exc


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) of RFC 5802: PBKDF2 with the mechanism's HMAC. (SASLprep is the identity for
    the printable ASCII passwords Kafka clients send; other passwords are taken as their UTF-8 bytes,
    as Kafka's own ScramFormatter does.)"""
    import hashlib

    return hashlib.pbkdf2_hmac(_hash(mechanism), password.encode("utf-8"), salt, iterations)
