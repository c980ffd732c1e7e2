"""What idempotence costs the broker itself, without any client in the way.

Appends the same record batches to a partition with and without a producer id (so with and without the
producer-state check: sequence validation, the 5-batch window, apply), in alternating rounds, through
`Partition.append` — the code path a Produce request takes after decoding. Client-side effects (for
instance librdkafka keeping one ProduceRequest in flight per partition for an idempotent producer) are
deliberately left out; bench/txn_bench.py measures those end to end.

Usage: python bench/idempotence_cost.py [--batches 2000] [--records 16] [--size 1024]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from eoslog.cluster.partition import Partition
from eoslog.log.config import LogConfig
from eoslog.log.manager import LogDirectory
from eoslog.records.builder import SimpleRecord, build_batch


def batches(count: int, records: int, size: int, producer_id: int) -> list[bytes]:
    value = b"x" * size
    return [
        build_batch([SimpleRecord(None, value) for _ in range(records)],
                    producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                    base_sequence=i * records if producer_id >= 0 else -1)
        for i in range(count)
    ]


async def run(args) -> None:
    config = LogConfig.from_properties({"eoslog.fsync.on.ack": "false", "segment.bytes": str(1 << 30)})
    with tempfile.TemporaryDirectory() as tmp:
        directory = LogDirectory.open(tmp, config)
        try:
            results = {"plain": [], "idempotent": []}
            for round_ in range(5):
                for name, pid in (("plain", -1), ("idempotent", 1000 + round_)):
                    data = batches(args.batches, args.records, args.size, pid)
                    log = directory.get_or_create_log(f"{name}{round_}", 0, config)
                    partition = Partition(f"{name}{round_}", 0, log, directory.group_commit)
                    started = time.perf_counter()
                    for batch in data:
                        partition.append(batch)
                    results[name].append(len(data) / (time.perf_counter() - started))
        finally:
            directory.close()
    plain, idem = max(results["plain"]), max(results["idempotent"])
    print(f"{args.batches} batches of {args.records} x {args.size} B, best of 5 rounds:")
    print(f"  plain       {plain:10,.0f} batches/s")
    print(f"  idempotent  {idem:10,.0f} batches/s   ratio {idem / plain:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batches", type=int, default=2000)
    parser.add_argument("--records", type=int, default=16)
    parser.add_argument("--size", type=int, default=1024)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
