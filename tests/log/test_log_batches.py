"""The test batch builder makes batches the project's record codec (and CRC check) accept."""

from log_batches import make_batch, payload_batch

from eoslog.records import decode_batch, read_header


def test_make_batch_decodes_with_the_record_codec():
    raw = make_batch([b"a", b"bb", None], keys=[b"k", None, b"z"], timestamps=[5, 9, 7], base_offset=40)
    header = read_header(raw)
    assert (header.base_offset, header.last_offset, header.records_count) == (40, 42, 3)
    assert (header.base_timestamp, header.max_timestamp) == (5, 9)
    decoded = decode_batch(raw)
    assert [r.value for r in decoded.records] == [b"a", b"bb", None]
    assert [r.key for r in decoded.records] == [b"k", None, b"z"]


def test_payload_batch_is_deterministic_and_sized():
    assert payload_batch(3, 1000) == payload_batch(3, 1000)
    assert payload_batch(3, 1000) != payload_batch(4, 1000)
    assert 1000 < len(payload_batch(3, 1000)) < 1100
