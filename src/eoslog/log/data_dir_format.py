"""The data directory's format version: the marker file ``<data_dir>/format.version`` (docs/storage-format.md,
"Format version").

A broker reads the marker before it opens anything else in the directory, so an older eoslog refuses a
directory a newer one wrote instead of misreading it. A directory without the marker is new, or was
written before the marker existed (both are version 1): the marker is written then. ``parse``/``render``
are pure; ``check_or_record`` does the I/O and turns an OSError into a one-line DataDirectoryError.
"""

from __future__ import annotations

import os
from pathlib import Path

from eoslog.log.errors import DataDirectoryError

FORMAT_VERSION_FILE = "format.version"
FORMAT_VERSION_KEY = "eoslog.storage.format.version"
# The newest layout this code reads and writes. Raise it when a file's layout changes so that older
# code can no longer read it, and say in docs/storage-format.md what changed.
CURRENT_FORMAT_VERSION = 1


def render(version: int) -> bytes:
    return f"{FORMAT_VERSION_KEY}={version}\n".encode()


def parse(text: str) -> int | None:
    """The version a marker's text records, or None when it records none (a damaged marker)."""
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == FORMAT_VERSION_KEY and value.strip().isdigit():
            return int(value.strip())
    return None


def unusable(data_dir: Path, exc: OSError) -> DataDirectoryError:
    """One line for an OSError on the data directory: the path, the errno text and the fix."""
    where = exc.filename or data_dir
    return DataDirectoryError(f"cannot use data dir {data_dir}: {exc.strerror or exc} ({where}); "
                              "make it a directory this user can write, or choose another --data-dir")


def check_or_record(data_dir: Path) -> int:
    """Creates ``data_dir`` when missing, refuses one of a newer format version, and writes the marker
    when absent. Returns the directory's format version."""
    marker = data_dir / FORMAT_VERSION_FILE
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        if marker.exists():
            version = parse(marker.read_text(errors="replace"))
            if version is None:
                raise DataDirectoryError(f"data dir {data_dir}: {marker} records no format version; "
                                         f"restore it (a directory this eoslog wrote has "
                                         f"{render(CURRENT_FORMAT_VERSION).decode().strip()})")
            if version > CURRENT_FORMAT_VERSION:
                raise DataDirectoryError(f"data dir {data_dir} was written by format version {version}; this "
                                         f"eoslog reads up to {CURRENT_FORMAT_VERSION} — upgrade eoslog")
            return version
        temporary = marker.with_name(marker.name + ".tmp")
        with open(temporary, "wb") as f:
            f.write(render(CURRENT_FORMAT_VERSION))
            f.flush()
            os.fsync(f.fileno())
        # No fsync of the directory: a marker the crash loses is written again, with the same version, at
        # the next start; the file's own fsync before the rename means it is never seen empty.
        os.replace(temporary, marker)
        return CURRENT_FORMAT_VERSION
    except OSError as exc:
        raise unusable(data_dir, exc) from exc
