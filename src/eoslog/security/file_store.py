"""A single node's ACLs: ``acls.json`` in the data directory (format in security/acl_format.py).

Each change rewrites the whole file atomically; ACL sets are small and change rarely, so simplicity
beats an append log here. Blocking: the authorizer calls it from a worker thread.
"""

from __future__ import annotations

from pathlib import Path

from eoslog.log.checkpoint import write_atomically
from eoslog.security.acl import AclBinding
from eoslog.security.acl_format import decode_file, encode_file

ACLS_FILE = "acls.json"


class FileAclStore:
    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / ACLS_FILE

    def load(self) -> list[AclBinding]:
        if not self.path.exists():
            return []
        return decode_file(self.path.read_bytes(), str(self.path))

    def add(self, current: frozenset[AclBinding], new: list[AclBinding]) -> None:
        write_atomically(self.path, encode_file(current | set(new)))

    def remove(self, current: frozenset[AclBinding], doomed: set[AclBinding]) -> None:
        write_atomically(self.path, encode_file(current - doomed))

    def close(self) -> None:
        pass
