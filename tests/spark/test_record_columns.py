"""The source's columnar decode core against eoslog's own record-batch decoder (pure, no broker, no Spark)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eoslog.records.batch import decode_batch
from eoslog.records.builder import SimpleRecord, build_batch
from eoslog.records.compression import CompressionType
from eoslog.records.control import ControlType, build_control_batch
from eoslog.records.errors import CorruptRecordError
from eoslog.spark.record_columns import FetchDecoder


class Log:
    """Batches back to back with consecutive offsets, as a Fetch response carries them."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.next_offset = 0

    def add(self, records, **kwargs) -> int:
        records = [r if isinstance(r, SimpleRecord) else SimpleRecord(*r) for r in records]
        base = self.next_offset
        self.parts.append(build_batch(records, base_offset=base, base_timestamp=kwargs.pop("ts", 1_000),
                                      **kwargs))
        self.next_offset += len(records)
        return base

    def marker(self, kind: ControlType, producer_id: int) -> int:
        base = self.next_offset
        self.parts.append(build_control_batch(kind, producer_id, 0, 0, base_offset=base, timestamp=5))
        self.next_offset += 1
        return base

    @property
    def data(self) -> bytes:
        return b"".join(self.parts)


def expected(data: bytes, keep=lambda header: True):
    """(offset, timestamp, key, value, headers) of every record, by the reference decoder."""
    rows, position = [], 0
    while position < len(data):
        batch = decode_batch(data, position)
        position += batch.header.size
        if keep(batch.header) and not batch.header.is_control:
            rows += [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch.absolute_records()]
    return rows


def rows(columns) -> list:
    if columns is None:
        return []
    headers = columns.headers or [()] * len(columns)
    return list(zip(columns.offsets.tolist(), columns.timestamps.tolist(), columns.keys.to_pylist(),
                    columns.values.to_pylist(), headers))


def decode(data: bytes, start: int = 0, until: int = 1 << 40, committed: bool = True, aborted=()):
    decoder = FetchDecoder(start, until, committed)
    return decoder, rows(decoder.decode(data, aborted))


def test_plain_batches_decode_like_the_reference_decoder():
    log = Log()
    log.add([(f"k{i}".encode(), b"v" * i) for i in range(300)])  # 1- and 2-byte lengths
    log.add([(None, b"x"), (b"", None), (None, None), (b"k", b"")])  # nulls and empties
    log.add([(b"big", b"z" * 70_000)])  # a 3-byte record length
    log.add([SimpleRecord(b"a", b"1", timestamp=5_000), SimpleRecord(b"b", b"2", timestamp=4_000)])
    decoder, got = decode(log.data)
    assert got == [(o, t, k, v, ()) for o, t, k, v, _ in expected(log.data)]
    assert decoder.next_offset == log.next_offset and decoder.done is False
    assert got[300][2] is None and got[301][2] == b"" and got[301][3] is None  # null stays null


def test_headers_are_decoded_per_record():
    log = Log()
    log.add([SimpleRecord(b"k", b"v", headers=(("h1", b"x"), ("h2", None))), SimpleRecord(b"k2", b"v2"),
             SimpleRecord(None, b"v3", headers=(("ü", b""),))])
    log.add([(b"no", b"headers")])
    _, got = decode(log.data)
    assert got == expected(log.data)
    assert got[0][4] == (("h1", b"x"), ("h2", None)) and got[1][4] == () and got[3][4] == ()


@pytest.mark.parametrize("codec", [CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4,
                                   CompressionType.ZSTD])
def test_compressed_batches_between_plain_ones(codec):
    log = Log()
    log.add([(b"a", b"plain")])
    log.add([(str(i).encode(), b"c" * (i % 50)) for i in range(500)], compression=codec)
    log.add([SimpleRecord(b"h", b"v", headers=(("x", b"y"),))], compression=codec)
    log.add([(b"z", b"plain again")])
    decoder, got = decode(log.data)
    assert got == expected(log.data) and len(got) == 503
    assert decoder.next_offset == 503


def test_log_append_time_batches_report_the_append_time():
    log = Log()
    log.add([SimpleRecord(b"k", b"v", timestamp=10), SimpleRecord(b"k", b"w", timestamp=20)], timestamp_type=1)
    columns = FetchDecoder(0, 10, True).decode(log.data)
    assert columns.timestamp_types.tolist() == [1, 1]
    assert columns.timestamps.tolist() == [20, 20]  # the batch's max_timestamp, as Kafka's consumers report


def test_range_bounds_cut_inside_batches():
    log = Log()
    log.add([(None, str(i).encode()) for i in range(10)])
    log.add([(None, str(i).encode()) for i in range(10, 20)])
    decoder, got = decode(log.data, start=3, until=14)
    assert [v for _, _, _, v, _ in got] == [str(i).encode() for i in range(3, 14)]
    assert decoder.done
    # A refetch of what was already read adds nothing.
    assert rows(decoder.decode(log.data)) == []


def test_read_committed_skips_aborted_transactions_and_every_control_batch():
    log = Log()
    first_aborted = log.add([(b"a", b"aborted-1")], producer_id=7, producer_epoch=0, is_transactional=True)
    log.add([(b"b", b"committed-1")], producer_id=8, producer_epoch=0, is_transactional=True)
    log.add([(b"c", b"plain")])
    log.add([(b"a", b"aborted-2")], producer_id=7, producer_epoch=0, is_transactional=True)
    log.marker(ControlType.ABORT, 7)
    log.marker(ControlType.COMMIT, 8)
    # Producer 7 again, in a later transaction that commits: no longer in the aborted set.
    log.add([(b"a", b"committed-2")], producer_id=7, producer_epoch=0, is_transactional=True)
    log.marker(ControlType.COMMIT, 7)
    aborted = [(7, first_aborted)]

    decoder, got = decode(log.data, aborted=aborted)
    assert [v for *_, v, _ in got] == [b"committed-1", b"plain", b"committed-2"]
    assert decoder.next_offset == log.next_offset  # control and aborted offsets are stepped over

    _, everything = decode(log.data, committed=False, aborted=aborted)
    assert [v for *_, v, _ in everything] == [b"aborted-1", b"committed-1", b"plain", b"aborted-2",
                                              b"committed-2"]


def test_a_range_ending_on_control_records_is_done():
    log = Log()
    log.add([(b"k", b"v")], producer_id=3, producer_epoch=0, is_transactional=True)
    log.marker(ControlType.COMMIT, 3)
    decoder, got = decode(log.data, until=log.next_offset)
    assert len(got) == 1 and decoder.done


def test_a_truncated_last_batch_is_left_for_the_next_fetch():
    log = Log()
    log.add([(None, b"one")])
    log.add([(None, b"two")])
    data = log.data
    decoder = FetchDecoder(0, 10, True)
    assert rows(decoder.decode(data[:-5])) == expected(data)[:1]
    assert decoder.next_offset == 1
    assert [v for *_, v, _ in rows(decoder.decode(data[len(log.parts[0]):]))] == [b"two"]


def test_corrupt_records_are_refused():
    good = build_batch([SimpleRecord(b"k", b"value"), SimpleRecord(b"k", b"value")], base_offset=0)
    # records_count 3 for 2 records: fix the CRC so only the count is wrong.
    from crc32c import crc32c

    from eoslog.records.header import CRC, CRC_OFFSET, CRC_START

    bad = bytearray(good)
    bad[57:61] = (3).to_bytes(4, "big")
    CRC.pack_into(bad, CRC_OFFSET, crc32c(memoryview(bad)[CRC_START:]))
    with pytest.raises(CorruptRecordError):
        FetchDecoder(0, 10, True).decode(bytes(bad))
    flipped = bytearray(good)
    flipped[-3] ^= 0xFF
    with pytest.raises(CorruptRecordError):  # the CRC catches it
        FetchDecoder(0, 10, True).decode(bytes(flipped))


_bytes = st.one_of(st.none(), st.binary(max_size=300))
_record = st.builds(SimpleRecord, _bytes, _bytes,
                    st.lists(st.tuples(st.text(max_size=5), _bytes), max_size=2).map(tuple),
                    st.integers(0, 2**40))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.lists(_record, min_size=1, max_size=20),
                          st.sampled_from([CompressionType.NONE, CompressionType.ZSTD])), min_size=1, max_size=5))
def test_random_batches_match_the_reference_decoder(batches):
    log = Log()
    for records, codec in batches:
        log.add(records, compression=codec, ts=None)
    _, got = decode(log.data)
    assert got == expected(log.data)


def test_the_gather_path_gives_the_same_columns_as_the_view_path(monkeypatch):
    import pyarrow as pa

    log = Log()
    log.add([(str(i).encode() if i % 3 else None, b"w" * (i % 40) if i % 5 else None) for i in range(200)])
    _, with_views = decode(log.data)
    monkeypatch.delattr(pa, "binary_view")  # as with a pyarrow older than the view layout
    _, gathered = decode(log.data)
    assert gathered == with_views == expected(log.data)
