"""Producer ids in persisted blocks: never handed out twice, not even across crashes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eoslog.coordinator.transaction.producer_id_block import (
    BLOCK_FILE_SIZE,
    BlockNotPersisted,
    ProducerIdBlockAllocator,
    ProducerIdBlockFileError,
    decode_block_file,
    encode_block_file,
)


def test_fresh_allocator_persists_before_handing_out():
    a = ProducerIdBlockAllocator(0, block_size=3)
    with pytest.raises(BlockNotPersisted):
        a.allocate()
    assert a.block_to_persist() == 3
    assert a.block_to_persist() == 3  # asking twice changes nothing
    a.block_persisted(3)
    assert a.block_to_persist() is None
    assert [a.allocate() for _ in range(3)] == [0, 1, 2]
    assert a.block_to_persist() == 6
    with pytest.raises(BlockNotPersisted):
        a.allocate()


def test_restart_skips_the_rest_of_the_persisted_block():
    a = ProducerIdBlockAllocator(0, block_size=1000)
    persisted = []
    ids = [a.allocate_with(persisted.append) for _ in range(5)]
    assert ids == [0, 1, 2, 3, 4] and persisted == [1000]
    b = ProducerIdBlockAllocator(persisted[-1], block_size=1000)  # crash, restart from the file
    assert b.allocate_with(persisted.append) == 1000 and persisted == [1000, 2000]


def test_failed_persist_hands_out_nothing():
    a = ProducerIdBlockAllocator(0, block_size=10)

    def broken(_end):
        raise OSError("disk full")

    with pytest.raises(OSError):
        a.allocate_with(broken)
    assert a.next_producer_id == 0 and a.persisted_block_end == 0
    assert a.allocate_with(lambda end: None) == 0


def test_stale_persist_confirmation_does_not_shrink_the_block():
    a = ProducerIdBlockAllocator(50, block_size=10)
    a.block_persisted(60)
    a.block_persisted(40)
    assert a.persisted_block_end == 60


def test_bad_arguments():
    with pytest.raises(ValueError):
        ProducerIdBlockAllocator(0, block_size=0)
    with pytest.raises(ValueError):
        ProducerIdBlockAllocator(-1)
    with pytest.raises(OverflowError):
        ProducerIdBlockAllocator(2**63 - 5, block_size=10).block_to_persist()


@given(st.lists(st.tuples(st.integers(0, 30), st.booleans()), max_size=30), st.integers(1, 7))
def test_ids_are_unique_across_any_crash_sequence(runs, block_size):
    """Each run allocates some ids then crashes (optionally while persisting); the file survives."""
    file_value = 0
    seen = set()
    for count, crash_in_persist in runs:
        a = ProducerIdBlockAllocator(file_value, block_size)

        def persist(end, crash=crash_in_persist and count % 3 == 0):
            nonlocal file_value
            if crash:
                raise OSError("crash before the write")
            assert end > file_value
            file_value = end

        for _ in range(count):
            try:
                pid = a.allocate_with(persist)
            except OSError:
                break
            assert pid not in seen and pid < file_value
            seen.add(pid)


def test_block_file_bytes():
    raw = encode_block_file(2000)
    assert raw == bytes.fromhex("45504944 0000 00000000000007d0 622240e4")
    assert len(raw) == BLOCK_FILE_SIZE == 18
    assert decode_block_file(raw) == 2000


@given(st.integers(0, 2**63 - 1))
def test_block_file_round_trip(end):
    assert decode_block_file(encode_block_file(end)) == end


@given(st.integers(0, 2**63 - 1), st.integers(0, BLOCK_FILE_SIZE - 1), st.integers(1, 255))
def test_any_damaged_byte_is_detected(end, position, flip):
    raw = bytearray(encode_block_file(end))
    raw[position] ^= flip
    with pytest.raises(ProducerIdBlockFileError):
        decode_block_file(bytes(raw))


@pytest.mark.parametrize("raw", [b"", encode_block_file(5)[:-1], encode_block_file(5) + b"\x00"])
def test_torn_block_file_is_refused(raw):
    with pytest.raises(ProducerIdBlockFileError):
        decode_block_file(raw)


def test_out_of_range_block_end_is_not_encoded():
    with pytest.raises(ValueError):
        encode_block_file(-1)
