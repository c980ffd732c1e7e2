"""The frame reader: any chunking of any frames gives back exactly those frames."""

import os
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eoslog.server.framing import FrameReader, FrameTooLarge


def feed(reader: FrameReader, data: bytes, chunk_sizes: list[int]) -> list[bytes]:
    frames = []
    position = 0
    sizes = iter(chunk_sizes)
    while position < len(data):
        target = reader.get_buffer()
        assert len(target) > 0
        n = min(len(target), next(sizes, 1 << 30), len(data) - position)
        n = max(n, 1)
        target[:n] = data[position : position + n]
        position += n
        reader.buffer_updated(n)
        while (frame := reader.next_frame()) is not None:
            frames.append(bytes(frame))
    return frames


@settings(max_examples=300, deadline=None)
@given(
    payloads=st.lists(st.one_of(st.binary(max_size=200), st.binary(min_size=900, max_size=3000)), max_size=12),
    chunks=st.lists(st.integers(min_value=1, max_value=2500), max_size=60),
    buffer_size=st.sampled_from([16, 64, 1024]),
)
def test_any_chunking_returns_the_frames_in_order(payloads, chunks, buffer_size):
    data = b"".join(struct.pack(">i", len(p)) + p for p in payloads)
    reader = FrameReader(max_frame=10_000, receive_buffer=buffer_size)
    assert feed(reader, data, chunks) == payloads
    assert reader.buffered == 0


def test_a_large_frame_lands_in_its_own_buffer_without_copies():
    reader = FrameReader(max_frame=1 << 20, receive_buffer=64)
    payload = bytes(range(256)) * 100
    data = struct.pack(">i", len(payload)) + payload
    frames = feed(reader, data, [10, 40, 5000, 1 << 20])
    assert frames == [payload]


@pytest.mark.parametrize("view_alive", [False, True])
def test_a_large_frame_grows_in_place_unless_a_view_of_it_is_alive(view_alive):
    """Growing a large frame's buffer keeps the same object (no zero-fill, no copy of what arrived) when
    nothing else looks at it, and falls back to a copy when a view handed out earlier is still alive
    (here: the caller keeps the last view until its next get_buffer returns)."""
    reader = FrameReader(max_frame=1 << 20, receive_buffer=64, large_start=16)
    payload = os.urandom(200_000)
    data = struct.pack(">i", len(payload)) + payload
    frames, buffers, position = [], set(), 0
    while position < len(data):
        target = reader.get_buffer()
        n = min(len(target), 3000, len(data) - position)
        target[:n] = data[position : position + n]
        position += n
        if not view_alive:
            del target
        reader.buffer_updated(n)
        while (frame := reader.next_frame()) is not None:
            frames.append(bytes(frame))
        if reader._large is not None:
            buffers.add(id(reader._large))
    assert frames == [payload]
    assert reader.holding == 0
    if view_alive:
        assert len(buffers) > 1  # copied into new buffers
    else:
        assert len(buffers) == 1  # one buffer, resized in place from 16 bytes to 200,000


def test_oversize_and_negative_sizes_are_refused():
    for size in (10_001, -1):
        reader = FrameReader(max_frame=10_000)
        target = reader.get_buffer()
        target[:4] = struct.pack(">i", size)
        reader.buffer_updated(4)
        with pytest.raises(FrameTooLarge):
            reader.next_frame()


def test_unread_small_frames_grow_the_buffer_instead_of_refusing_bytes():
    reader = FrameReader(max_frame=100, receive_buffer=16)
    data = b"".join(struct.pack(">i", 4) + b"abcd" for _ in range(10))  # 80 bytes, never taken
    position = 0
    while position < len(data):
        target = reader.get_buffer()
        n = min(len(target), len(data) - position)
        target[:n] = data[position : position + n]
        reader.buffer_updated(n)
        position += n
    assert reader.buffered == 80
    assert [reader.next_frame() for _ in range(10)] == [b"abcd"] * 10
