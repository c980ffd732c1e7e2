"""Which partition of an internal topic a coordinator key lives on, exactly as Kafka computes it.

Both coordinators use it: ``__consumer_offsets`` is partitioned by group id and ``__transaction_state``
by transactional id, with ``Utils.abs(key.hashCode()) % partitions``, where hashCode is Java's String hash.

It is part of what brokers and clients agree on, so it sits in protocol/ (pure, no I/O, below every room that needs it)
rather than in coordinator/: the Spark sink computes it too, to give its transactional ids the
``__transaction_state`` partition of their transaction group (spark/task_writer.py), and so do the
verifier and the tests, which find a key's coordinator with it.
"""

from __future__ import annotations


def java_string_hash(s: str) -> int:
    """Java's String.hashCode(): ``h = 31*h + c`` over UTF-16 code units, as a signed int32."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - 0x1_0000_0000 if h & 0x8000_0000 else h


def partition_for(key: str, num_partitions: int) -> int:
    """Kafka's coordinator partition: Utils.abs(key.hashCode()) % n (Utils.abs maps MIN_VALUE to 0)."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    h = java_string_hash(key)
    return (0 if h == -0x8000_0000 else abs(h)) % num_partitions
