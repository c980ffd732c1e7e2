"""A slice of a segment file, handed up to the network layer so log data is sent without copying."""

from __future__ import annotations

from typing import NamedTuple


class FileRegion(NamedTuple):
    """``length`` bytes of the open file descriptor ``fd`` starting at ``position``.

    The descriptor belongs to a segment; it stays valid until the segment is deleted, and segment
    deletion is deferred (Kafka's ``file.delete.delay.ms``) so a region handed out is never yanked
    from under a send in progress.
    """

    fd: int
    position: int
    length: int
