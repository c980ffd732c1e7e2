"""The sink's rows, as Arrow record batches, into Kafka RecordBatch v2 bytes: the native writer's encode
core (no I/O). The mirror of :mod:`record_columns`.

Rows have the columns of Spark's Kafka sink: ``value`` (binary or string, required), and optionally
``key`` (binary or string), ``topic`` (string, unless the ``topic`` option names one), ``partition``
(int) and ``headers`` (array of struct<key string, value binary>).

Partitioning is librdkafka's ``murmur2_random``, which is Java's default partitioner: a row with a
``partition`` value goes there; a keyed row to ``(murmur2(key) & 0x7fffffff) % partitions``; a row with
a null key to a random partition. murmur2 runs over all keys of one length at a time with numpy
(uint32 arithmetic wraps as Java's int does), so the cost is a few numpy passes per distinct key length.

Records are assembled without a Python loop per row: every varint of every record (length, offset
delta, key length, value length) is computed with numpy into a fixed-width matrix and compacted into one
Arrow binary column of "prefixes"; Arrow's ``binary_join_element_wise`` then concatenates prefix, key,
value-length, value and headers row by row in C++, and the result's data buffer *is* the records
section of the batch. Every record of a batch shares the batch's timestamp (delta 0, CreateTime), as a
producer that stamps records when it sends them would; headers, when the column exists, are encoded
per row in Python (they are rare in bulk data).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from eoslog.records.checksum import crc32c
from eoslog.records.header import (
    CRC,
    CRC_OFFSET,
    CRC_START,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    TRANSACTIONAL_BIT,
)
from eoslog.records.murmur2 import MURMUR2_M, MURMUR2_SEED, murmur2_bytes  # noqa: F401 (murmur2_bytes re-exported)

# Kafka's default max.message.bytes is 1 MiB + 12; batches stay well under it so a topic with the
# default limit takes them, and a request carries several partitions' batches.
MAX_BATCH_BYTES = 512 * 1024
_VARINT_WIDTH = 5  # every varint here encodes an int32
_RECORD_FIXED = 2  # attributes (0) and timestamp delta (0): one byte each
_NO_HEADERS = b"\x00"  # header count 0


# ---- murmur2 (the one-key reference, murmur2_bytes, is in records/murmur2.py) -------------------------------

def _offsets_and_data(array) -> tuple[np.ndarray, np.ndarray]:
    """The int32 offsets (``len + 1``, absolute) and the data bytes of a pa.binary() array."""
    offsets = np.frombuffer(array.buffers()[1], dtype=np.int32)[array.offset:array.offset + len(array) + 1]
    data_buffer = array.buffers()[2]
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    return offsets, data


def murmur2(keys) -> np.ndarray:
    """murmur2 of every entry of a pa.binary() array as uint32 (0 for nulls: the caller spreads those)."""
    n = len(keys)
    out = np.zeros(n, dtype=np.uint32)
    if n == 0:
        return out
    offsets, data = _offsets_and_data(keys)
    lengths = np.diff(offsets)
    valid = _valid(keys)
    m = np.uint32(MURMUR2_M)
    with np.errstate(over="ignore"):
        for length in np.unique(lengths[valid]).tolist():
            rows = np.nonzero(valid & (lengths == length))[0]
            matrix = data[offsets[rows][:, None] + np.arange(length)].astype(np.uint32) if length else None
            h = np.full(len(rows), MURMUR2_SEED ^ length, dtype=np.uint32)
            for word in range(length // 4):
                c = 4 * word
                k = matrix[:, c] | (matrix[:, c + 1] << 8) | (matrix[:, c + 2] << 16) | (matrix[:, c + 3] << 24)
                k *= m
                k ^= k >> 24
                k *= m
                h *= m
                h ^= k
            tail, base = length % 4, length & ~3
            if tail >= 3:
                h ^= matrix[:, base + 2] << 16
            if tail >= 2:
                h ^= matrix[:, base + 1] << 8
            if tail >= 1:
                h ^= matrix[:, base]
                h *= m
            h ^= h >> 13
            h *= m
            h ^= h >> 15
            out[rows] = h
    return out


def _valid(array) -> np.ndarray:
    if array.null_count == 0:
        return np.ones(len(array), dtype=bool)
    import pyarrow.compute as pc

    return np.asarray(pc.is_valid(array))


# ---- columns --------------------------------------------------------------------------------------------

@dataclass
class SinkColumns:
    """One Arrow batch's rows as the encoder needs them. ``keys``/``values`` are pa.binary() arrays;
    ``topics`` per row (None when ``topic`` is the single topic); ``partitions`` int64 with -1 for "choose";
    ``headers`` encoded header sections per row (None when there is no headers column)."""

    topic: str | None
    topics: list[str] | None
    keys: object
    values: object
    partitions: np.ndarray | None
    headers: list[bytes] | None

    def __len__(self) -> int:
        return len(self.values)


def _binary(batch, name: str):
    import pyarrow as pa

    names = batch.schema.names
    if name not in names:
        return None
    column = batch.column(names.index(name))
    return column if column.type == pa.binary() else column.cast(pa.binary())


def sink_columns(batch, topic_option: str | None) -> SinkColumns:
    """The sink's columns of one Arrow record batch (see the module doc); ValueError on a bad schema."""
    import pyarrow as pa

    n = batch.num_rows
    names = batch.schema.names
    values = _binary(batch, "value")
    if values is None:
        raise ValueError("the sink needs a 'value' column (binary or string)")
    keys = _binary(batch, "key")
    if keys is None:
        keys = pa.nulls(n, pa.binary())
    topics = None
    if topic_option is None:
        if "topic" not in names:
            raise ValueError("no 'topic' option and no 'topic' column")
        topics = batch.column(names.index("topic")).to_pylist()
        if None in topics:
            raise ValueError("a row has a null 'topic' and there is no 'topic' option")
    partitions = None
    if "partition" in names:
        column = batch.column(names.index("partition"))
        partitions = np.asarray(column.fill_null(-1), dtype=np.int64)
    headers = None
    if "headers" in names:
        headers = [encode_headers(h) for h in batch.column(names.index("headers")).to_pylist()]
    return SinkColumns(topic_option, topics, keys, values, partitions, headers)


def encode_headers(headers) -> bytes:
    """One record's headers section: count, then (key length, key, value length, value) each."""
    if not headers:
        return _NO_HEADERS
    out = bytearray(_varint_bytes(len(headers)))
    for entry in headers:
        key, value = (entry["key"], entry["value"]) if isinstance(entry, dict) else entry
        if key is None:
            raise ValueError("a header key is null")
        name = key.encode("utf-8")
        out += _varint_bytes(len(name))
        out += name
        if value is None:
            out += _varint_bytes(-1)
        else:
            value = value.encode("utf-8") if isinstance(value, str) else bytes(value)
            out += _varint_bytes(len(value))
            out += value
    return bytes(out)


def _varint_bytes(value: int) -> bytes:
    z = (value << 1) ^ (value >> 63)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


# ---- partitioning ---------------------------------------------------------------------------------------

def choose_partitions(columns: SinkColumns, partition_count, rng: np.random.Generator) -> np.ndarray:
    """Each row's partition (int64): the ``partition`` column where set, else murmur2 of the key modulo
    the topic's partition count, else (null key) a random partition. ``partition_count(topic)`` -> int."""
    n = len(columns)
    out = columns.partitions.copy() if columns.partitions is not None else np.full(n, -1, dtype=np.int64)
    choose = out < 0
    if not choose.any():
        return out
    if columns.topics is None:
        counts = np.full(n, partition_count(columns.topic), dtype=np.int64)
    else:
        per_topic = {t: partition_count(t) for t in set(columns.topics)}
        counts = np.fromiter((per_topic[t] for t in columns.topics), dtype=np.int64, count=n)
    keyed = choose & _valid(columns.keys)
    if keyed.any():
        hashes = (murmur2(columns.keys).astype(np.int64) & 0x7FFFFFFF)
        out[keyed] = hashes[keyed] % counts[keyed]
    unkeyed = choose & ~keyed
    if unkeyed.any():
        out[unkeyed] = rng.integers(0, counts[unkeyed])
    return out


@dataclass
class PartitionRows:
    """The rows of one batch bound for one partition, in their original order."""

    topic: str
    partition: int
    keys: object
    values: object
    headers: list[bytes] | None


def group_by_partition(columns: SinkColumns, partitions: np.ndarray) -> list[PartitionRows]:
    """Rows split by (topic, partition), each group keeping the rows' order (a stable sort)."""
    import pyarrow as pa

    n = len(columns)
    if columns.topics is None:
        names = [columns.topic]
        codes = np.zeros(n, dtype=np.int64)
    else:
        names = sorted(set(columns.topics))
        index = {t: i for i, t in enumerate(names)}
        codes = np.fromiter((index[t] for t in columns.topics), dtype=np.int64, count=n)
    group = (codes << 32) | partitions
    first = group[0] if n else 0
    if n and (group == first).all():
        return [PartitionRows(names[int(codes[0])], int(partitions[0]), columns.keys, columns.values,
                              columns.headers)]
    order = np.argsort(group, kind="stable")
    ordered = group[order]
    cuts = np.flatnonzero(np.diff(ordered)) + 1
    keys = columns.keys.take(pa.array(order))
    values = columns.values.take(pa.array(order))
    out = []
    for start, end in zip(np.concatenate([[0], cuts]).tolist(), np.concatenate([cuts, [n]]).tolist()):
        rows = order[start:end]
        out.append(PartitionRows(
            names[int(codes[rows[0]])], int(partitions[rows[0]]), keys.slice(start, end - start),
            values.slice(start, end - start),
            None if columns.headers is None else [columns.headers[i] for i in rows.tolist()]))
    return out


# ---- records and batches --------------------------------------------------------------------------------

def _zigzag(values: np.ndarray) -> np.ndarray:
    v = values.astype(np.int64)
    return ((v << 1) ^ (v >> 63)).astype(np.uint64)


def _varints(zigzagged: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(n, 5) uint8 varint bytes (unused columns arbitrary) and each varint's length. Column by column
    on uint32 vectors: much cheaper than broadcasting over an (n, 5) matrix."""
    z = zigzagged.astype(np.uint32)
    out = np.empty((len(z), _VARINT_WIDTH), dtype=np.uint8)
    lengths = np.ones(len(z), dtype=np.int64)
    for i in range(_VARINT_WIDTH):
        group = (z >> np.uint32(7 * i)).astype(np.uint8) & np.uint8(0x7F)
        if i + 1 < _VARINT_WIDTH:
            more = z >= np.uint32(1 << (7 * (i + 1)))
            lengths += more
            group |= more.view(np.uint8) << np.uint8(7)
        out[:, i] = group
    return out, lengths


def _lengths(array) -> np.ndarray:
    """Entry lengths, -1 for nulls (Kafka's null key or value)."""
    offsets, _ = _offsets_and_data(array)
    lengths = np.diff(offsets).astype(np.int64)
    if array.null_count:
        lengths[~_valid(array)] = -1
    return lengths


def row_ranges(rows: PartitionRows, max_batch_bytes: int = MAX_BATCH_BYTES) -> list[tuple[int, int]]:
    """[start, end) row ranges whose batches stay under ``max_batch_bytes`` (by an upper bound on each
    record's size); a single larger record gets a batch of its own (the broker judges it)."""
    n = len(rows.values)
    sizes = np.maximum(_lengths(rows.keys), 0) + np.maximum(_lengths(rows.values), 0) + 4 * _VARINT_WIDTH
    if rows.headers is not None:
        sizes += np.fromiter((len(h) for h in rows.headers), dtype=np.int64, count=n)
    ends = np.cumsum(sizes)
    if n == 0 or ends[-1] <= max_batch_bytes - HEADER_SIZE:
        return [(0, n)]
    out, start, consumed = [], 0, 0
    while start < n:
        end = int(np.searchsorted(ends, consumed + max_batch_bytes - HEADER_SIZE, side="right"))
        end = max(end, start + 1)
        out.append((start, end))
        consumed = int(ends[end - 1])
        start = end
    return out


def encode_records(keys, values, headers: list[bytes] | None) -> bytes:
    """The records section of a batch: record i has offset delta i and timestamp delta 0."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(values)
    key_lengths, value_lengths = _lengths(keys), _lengths(values)
    offset_varint, offset_len = _varints(_zigzag(np.arange(n)))
    key_varint, key_len = _varints(_zigzag(key_lengths))
    value_varint, value_len = _varints(_zigzag(value_lengths))
    if headers is None:
        header_lengths = np.ones(n, dtype=np.int64)
        header_column = pa.scalar(_NO_HEADERS, pa.binary())
    else:
        header_lengths = np.fromiter((len(h) for h in headers), dtype=np.int64, count=n)
        header_column = pa.array(headers, pa.binary())
    record_lengths = (_RECORD_FIXED + offset_len + key_len + np.maximum(key_lengths, 0) + value_len
                      + np.maximum(value_lengths, 0) + header_lengths)
    length_varint, length_len = _varints(_zigzag(record_lengths))
    fixed = np.zeros((n, _RECORD_FIXED), dtype=np.uint8)
    matrix = np.concatenate([length_varint, fixed, offset_varint, key_varint], axis=1)
    widths = np.arange(_VARINT_WIDTH)
    used = np.concatenate([widths < length_len[:, None], np.ones((n, _RECORD_FIXED), dtype=bool),
                           widths < offset_len[:, None], widths < key_len[:, None]], axis=1)
    prefixes = _binary_from(matrix[used], length_len + _RECORD_FIXED + offset_len + key_len)
    value_prefixes = _binary_from(value_varint[widths < value_len[:, None]], value_len)
    joined = pc.binary_join_element_wise(prefixes, pc.fill_null(keys, b""), value_prefixes,
                                         pc.fill_null(values, b""), header_column, b"")
    offsets, data = _offsets_and_data(joined)
    return data[offsets[0]:offsets[-1]].tobytes()


def _binary_from(data: np.ndarray, lengths: np.ndarray):
    import pyarrow as pa

    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.Array.from_buffers(pa.binary(), len(lengths), [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def encode_batch(records: bytes, count: int, *, timestamp_ms: int, producer_id: int, producer_epoch: int,
                 base_sequence: int, transactional: bool) -> bytes:
    """A RecordBatch v2 (docs/record-format.md) around ``records`` (from :func:`encode_records`), base
    offset 0 (the broker assigns offsets), CreateTime ``timestamp_ms``, CRC-32C over attributes onwards."""
    header = bytearray(HEADER_SIZE)
    HEADER.pack_into(header, 0, 0, HEADER_SIZE - LOG_OVERHEAD + len(records), -1, MAGIC_V2, 0,
                     TRANSACTIONAL_BIT if transactional else 0, count - 1, timestamp_ms, timestamp_ms,
                     producer_id, producer_epoch, base_sequence, count)
    CRC.pack_into(header, CRC_OFFSET, crc32c(records, crc32c(memoryview(header)[CRC_START:])))
    return bytes(header) + records
