"""Kafka's default partitioner hash (Java's ``Utils.murmur2``), one key at a time, without numpy: for clients
that pick a partition per record (eoslog.client.checkback). The Spark sink's vectorised version lives in
spark/record_encoder.py and is checked against this one."""

from __future__ import annotations

MURMUR2_SEED = 0x9747B28C
MURMUR2_M = 0x5BD1E995


def murmur2_bytes(data: bytes) -> int:
    """Java's ``Utils.murmur2`` of one key, as an unsigned 32-bit int (the reference for the numpy one)."""
    mask = 0xFFFFFFFF
    length = len(data)
    h = (MURMUR2_SEED ^ length) & mask
    for i in range(length // 4):
        k = int.from_bytes(data[4 * i:4 * i + 4], "little")
        k = (k * MURMUR2_M) & mask
        k ^= k >> 24
        k = (k * MURMUR2_M) & mask
        h = (h * MURMUR2_M) & mask
        h ^= k
    tail, base = length % 4, length & ~3
    if tail >= 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * MURMUR2_M) & mask
    h ^= h >> 13
    h = (h * MURMUR2_M) & mask
    h ^= h >> 15
    return h


def partition_for_key(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner gives a non-null key."""
    return (murmur2_bytes(key) & 0x7FFFFFFF) % partitions
