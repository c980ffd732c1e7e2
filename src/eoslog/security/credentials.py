"""The durable store of SCRAM credentials: user -> mechanism -> :class:`ScramCredential`.

Format, one JSON file ``<data_dir>/scram-credentials.json`` (mode 0600, replaced atomically), each user
in the shape Kafka's ZooKeeper mode gives ``/config/users/<user>``:

    {"version": 1, "users": {"alice": {"SCRAM-SHA-512": "salt=...,stored_key=...,server_key=...,iterations=8192"}}}

Only salted, iterated keys are kept; a password never reaches the disk. The broker owns the file while it
runs (changes go through AlterUserScramCredentials); ``eoslog users --data-dir`` edits it only while no
broker holds the data directory, which is how the first administrator is created.

On a cluster the same credentials live in ZooKeeper instead (``/config/users/<user>``,
cluster/user_credentials.py), and a :class:`CredentialStore` without a path is each broker's in-memory
copy of them. Either way a change is a :data:`Changes` map, applied by :meth:`CredentialStore.alter`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from eoslog.security.scram import ScramCredential

CREDENTIALS_FILE = "scram-credentials.json"
FORMAT_VERSION = 1

# user -> mechanism -> the new credential, or None to remove that mechanism's
Changes = dict[str, dict[str, "ScramCredential | None"]]


class CredentialStore:
    """In memory; :meth:`save` writes it through the ``path`` given (None: memory only, for unit tests)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._users: dict[str, dict[str, ScramCredential]] = {}

    @classmethod
    def open(cls, data_dir: Path) -> CredentialStore:
        store = cls(Path(data_dir) / CREDENTIALS_FILE)
        if store.path.exists():
            store._users = decode(store.path.read_bytes(), str(store.path))
        return store

    def lookup(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def credentials_of(self, user: str) -> dict[str, ScramCredential]:
        return dict(self._users.get(user, {}))

    def users(self) -> list[str]:
        return sorted(self._users)

    def upsert(self, user: str, credential: ScramCredential) -> None:
        check_user(user)
        self._users.setdefault(user, {})[credential.mechanism] = credential

    def delete(self, user: str, mechanism: str) -> bool:
        """False when the user has no credential for that mechanism."""
        mechanisms = self._users.get(user)
        if not mechanisms or mechanism not in mechanisms:
            return False
        del mechanisms[mechanism]
        if not mechanisms:
            del self._users[user]
        return True

    def replace_all(self, users: dict[str, dict[str, ScramCredential]]) -> None:
        """The whole set at once (a fresh read of ZooKeeper): lookups see the old set or the new one."""
        self._users = users

    async def alter(self, changes: Changes) -> None:
        """Applies and saves before returning: an acknowledged change survives a crash."""
        for user, mechanisms in changes.items():
            for mechanism, credential in mechanisms.items():
                if credential is None:
                    self.delete(user, mechanism)
                else:
                    self.upsert(user, credential)
        self.save()

    def save(self) -> None:
        if self.path is None:
            return
        from eoslog.log.checkpoint import write_atomically

        write_atomically(self.path, encode(self._users))
        os.chmod(self.path, 0o600)


# security/scram.py (hashing, the credential class) is imported where it is used: a broker without a
# credentials file opens its store, and its port, without it.


def check_user(user: str) -> None:
    from eoslog.security.scram import CredentialError

    if not user or len(user) > 256 or any(ord(c) < 0x20 for c in user):
        raise CredentialError(f"a user name is 1 to 256 printable characters, got {user!r}")


def encode(users: dict[str, dict[str, ScramCredential]]) -> bytes:
    body = {name: {m: c.to_kafka_string() for m, c in sorted(creds.items())} for name, creds in sorted(users.items())}
    return json.dumps({"version": FORMAT_VERSION, "users": body}, indent=1).encode()


def decode(data: bytes, where: str = "credentials") -> dict[str, dict[str, ScramCredential]]:
    from eoslog.security.scram import CredentialError

    try:
        document = json.loads(data)
        if document.get("version") != FORMAT_VERSION or not isinstance(document.get("users"), dict):
            raise CredentialError(f"expected version {FORMAT_VERSION} with a users object")
        return {user: decode_user(entries) for user, entries in document["users"].items()}
    except (ValueError, AttributeError, TypeError) as exc:
        raise CredentialError(f"{where}: not a SCRAM credential file: {exc}") from exc


def decode_user(entries: dict[str, str]) -> dict[str, ScramCredential]:
    """One user's mechanisms (Kafka's ``config`` map of ``/config/users/<user>``); other keys (quotas) are
    not ours and are skipped."""
    from eoslog.security.scram import MECHANISMS, ScramCredential

    return {mechanism: ScramCredential.from_kafka_string(mechanism, text)
            for mechanism, text in entries.items() if mechanism in MECHANISMS}


def altered_config(config: dict[str, str], changes: dict[str, ScramCredential | None]) -> dict[str, str]:
    """One user's Kafka ``config`` map with ``changes`` applied; keys that are not SCRAM (quotas) stay."""
    result = dict(config)
    for mechanism, credential in changes.items():
        if credential is None:
            result.pop(mechanism, None)
        else:
            result[mechanism] = credential.to_kafka_string()
    return result


def mechanisms_of(names: Iterable[str]) -> list[str]:
    from eoslog.security.scram import MECHANISMS

    return [name for name in names if name in MECHANISMS]
