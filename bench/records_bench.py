"""Micro-benchmark of the record format: header-only validation against full decoding, and the codecs.

    .venv/bin/python bench/records_bench.py

Figures from a shared machine: compare the ratios within one run, not absolute numbers between runs.
"""

from __future__ import annotations

import json
import random
import time

from eoslog.records import (
    CompressionType,
    SimpleRecord,
    build_batch,
    compress,
    decode_batch,
    decompress,
    iter_headers,
    read_header,
    set_base_offset,
)


def _rate(function, *, seconds: float = 0.5) -> float:
    """Calls per second, measured over about ``seconds``."""
    calls, start = 0, time.perf_counter()
    batch_size = 1
    while True:
        for _ in range(batch_size):
            function()
        calls += batch_size
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return calls / elapsed
        batch_size = min(batch_size * 2, 10_000)


def _json_like(size: int) -> bytes:
    rng = random.Random(7)
    lines, total = [], 0
    while total < size:
        line = (
            json.dumps(
                {
                    "user_id": rng.randrange(1_000_000),
                    "event": rng.choice(["click", "view", "purchase", "scroll"]),
                    "page": f"/products/{rng.randrange(5000)}",
                    "ts": 1_700_000_000_000 + rng.randrange(10**9),
                    "amount": round(rng.random() * 100, 2),
                }
            ).encode()
            + b"\n"
        )
        lines.append(line)
        total += len(line)
    return b"".join(lines)[:size]


def main() -> None:
    # ~1 KiB batches: 10 records of ~90 bytes, as a small-message producer sends them.
    values = _json_like(1 << 20).split(b"\n")
    records = [SimpleRecord(None, v) for v in values[:10]]
    batch = bytearray(build_batch(records, producer_id=1, producer_epoch=0, base_sequence=0))
    print(f"batch of {len(records)} records: {len(batch)} bytes")
    many = bytes(batch) * 1000

    print(f"read_header (CRC checked):   {_rate(lambda: read_header(batch)) / 1e3:8.0f} k batches/s")
    print(
        "read_header (verify_crc off):"
        f"{_rate(lambda: read_header(batch, verify_crc=False)) / 1e3:8.0f} k batches/s"
    )
    print(
        f"set_base_offset:             {_rate(lambda: set_base_offset(batch, 0, 12345)) / 1e3:8.0f} k calls/s"
    )
    per_1000 = _rate(lambda: sum(1 for _ in iter_headers(many)), seconds=1.0)
    print(f"iter_headers over 1000:      {per_1000:8.0f} k batches/s")
    print(f"decode_batch (full):         {_rate(lambda: decode_batch(batch)) / 1e3:8.0f} k batches/s")

    data = _json_like(1 << 20)
    print(f"\ncodecs on {len(data) >> 20} MiB of JSON lines (MB/s):")
    print(f"{'codec':8} {'ratio':>6} {'compress':>9} {'decompress':>11}")
    for codec in CompressionType:
        if codec is CompressionType.NONE:
            continue
        compressed = compress(codec, data)
        c_rate = _rate(lambda c=codec: compress(c, data), seconds=0.5) * len(data) / 1e6
        d_rate = _rate(lambda c=codec, z=compressed: decompress(c, z), seconds=0.5) * len(data) / 1e6
        print(f"{codec.name:8} {len(data) / len(compressed):6.1f} {c_rate:9.0f} {d_rate:11.0f}")


if __name__ == "__main__":
    main()
