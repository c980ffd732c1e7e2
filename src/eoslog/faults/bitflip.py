"""Silent disk corruption: one bit flipped in a stored batch of a stopped broker's segment (issue 38).

What a bad sector or a firmware bug does, in its smallest form: the file keeps its size and its batch
framing, and one bit of one batch's body changes. The flip is aimed at a batch that is *synced* (below
``below_offset``, which the caller takes from the broker's own high watermark or recovery point), so it
models rot of data already acknowledged, not a torn write, and at the bytes the CRC covers (21 to the end
of the batch): a flip in the 21 bytes before them is outside what any record checksum can see
(docs/durability.md, "Corruption").

The broker must be stopped (SIGTERM or SIGKILL) while the file is changed: its page cache would otherwise
keep serving the old bytes. The write goes straight to the file and is fsync'ed, so it survives anything
the restart does to the page cache.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass

from eoslog.log.scan import scan_batches
from eoslog.log.segment import LOG_SUFFIX
from eoslog.records.header import ATTRIBUTES, ATTRIBUTES_OFFSET, CONTROL_BIT, CRC_START


@dataclass(frozen=True)
class Flip:
    """Where the bit was flipped: file, absolute byte, bit (0 = least significant) and the batch's
    offsets, so a check can ask for exactly those records."""

    path: str
    byte: int
    bit: int
    base_offset: int
    last_offset: int


def stored_batches(partition_dir: str, below_offset: int | None = None, *, data_only: bool = False
                   ) -> list[tuple[str, int, int, int, int]]:
    """(path, position, size, base_offset, last_offset) of every batch of the partition directory whose
    last offset is below ``below_offset`` (all when None), in offset order; ``data_only``: not control
    batches (transaction markers), whose loss a reader cannot step over the way it skips records."""
    found = []
    for name in sorted(os.listdir(partition_dir)):
        if not name.endswith(LOG_SUFFIX):
            continue
        path = os.path.join(partition_dir, name)
        fd = os.open(path, os.O_RDONLY)
        try:
            for batch in scan_batches(fd, 0, os.fstat(fd).st_size):
                if below_offset is not None and batch.last_offset >= below_offset:
                    continue
                if data_only:
                    (attributes,) = ATTRIBUTES.unpack(os.pread(fd, 2, batch.position + ATTRIBUTES_OFFSET))
                    if attributes & CONTROL_BIT:
                        continue
                found.append((path, batch.position, batch.size, batch.base_offset, batch.last_offset))
        finally:
            os.close(fd)
    return found


def flip_bit(partition_dir: str, rng: random.Random, *, below_offset: int | None = None,
             data_only: bool = False) -> Flip:
    """Flips one random bit in the CRC-covered bytes of a random stored batch; fsyncs the file."""
    batches = stored_batches(partition_dir, below_offset, data_only=data_only)
    if not batches:
        raise ValueError(f"{partition_dir}: no stored batch below offset {below_offset} to corrupt")
    path, position, size, base_offset, last_offset = rng.choice(batches)
    byte = position + rng.randrange(CRC_START, size)
    bit = rng.randrange(8)
    fd = os.open(path, os.O_RDWR)
    try:
        old = os.pread(fd, 1, byte)[0]
        os.pwrite(fd, bytes([old ^ (1 << bit)]), byte)
        os.fsync(fd)
    finally:
        os.close(fd)
    return Flip(path, byte, bit, base_offset, last_offset)
