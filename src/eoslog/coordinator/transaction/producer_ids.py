"""Where a broker's never-used producer ids come from: blocks whose end is persisted in the data directory
on a sole broker (producer_id_block.py, the pure core), blocks claimed in ZooKeeper on a cluster (Kafka's
``/latest_producer_id_block``), so no two brokers ever hand out the same id.

Contract
- Opened at start-up: a damaged block file stops the broker rather than risk handing out a used id.
- Only the broker's event loop calls :meth:`allocate`. One persisted block end or one ZooKeeper claim
  per 1000 ids, made on the loop: one small file write, or one conditional set on ZooKeeper (about a
  millisecond locally), is cheaper than a thread hop.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from eoslog.coordinator.transaction.producer_id_block import (
    BLOCK_FILE_NAME,
    DEFAULT_BLOCK_SIZE,
    ProducerIdBlockAllocator,
    decode_block_file,
    encode_block_file,
)
from eoslog.log.checkpoint import write_atomically
from eoslog.protocol.errors import CoordinatorNotAvailableError

# (broker id, block size) -> [start, end) of a block no other broker will hand out (ZooKeeper's claim).
ClaimBlock = Callable[[int, int], tuple[int, int]]


class ProducerIds:
    def __init__(self, data_dir: Path, node_id: int, claim_block: ClaimBlock | None = None) -> None:
        self._node_id = node_id
        self._claim_block = claim_block
        self._block: list[int] | None = None  # [next, end) of the claimed block (cluster)
        self._path = Path(data_dir) / BLOCK_FILE_NAME
        self._allocator: ProducerIdBlockAllocator | None = None
        if claim_block is None:
            data = self._path.read_bytes() if self._path.exists() else None
            self._allocator = ProducerIdBlockAllocator(decode_block_file(data) if data is not None else 0)

    def allocate(self) -> int:
        if self._allocator is not None:
            return self._allocator.allocate_with(self._persist)
        if self._block is None or self._block[0] >= self._block[1]:
            try:
                self._block = list(self._claim_block(self._node_id, DEFAULT_BLOCK_SIZE))
            except Exception as exc:
                raise CoordinatorNotAvailableError(f"cannot claim producer ids in ZooKeeper: {exc!r}") from exc
        producer_id = self._block[0]
        self._block[0] += 1
        return producer_id

    def _persist(self, block_end: int) -> None:
        write_atomically(self._path, encode_block_file(block_end))
