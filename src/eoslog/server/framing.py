"""Kafka request framing without I/O: bytes in (through buffers we hand out), whole frames out.

Built for ``asyncio.BufferedProtocol``: the transport reads straight into the memory ``get_buffer``
returns, so a request is copied at most once on its way in. Small requests share one receive buffer and
are copied out of it (cheap, and it lets the buffer be reused at once). A request larger than the receive
buffer gets a buffer of its own, sized from its length prefix: the kernel writes a 1 MiB Produce request
straight into the bytearray the dispatcher then reads, and the log writes from, without any copy.

A frame is a 4-byte big-endian size followed by that many bytes; ``next_frame`` returns the bytes after
the size. A size below zero or above the limit raises :class:`FrameTooLarge` (the caller hangs up: Kafka
cannot skip a frame it will not read).
"""

from __future__ import annotations

import struct

SIZE_PREFIX = struct.Struct(">i")
RECEIVE_BUFFER = 256 * 1024


class FrameTooLarge(Exception):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"request frame of {size} bytes exceeds socket.request.max.bytes={limit}")
        self.size = size


class FrameReader:
    """Invariants: ``_start <= _end <= len(_buffer)``; bytes ``[_start, _end)`` are received but not yet
    returned as frames; while ``_large`` is set, every byte received belongs to that one frame."""

    def __init__(self, max_frame: int, receive_buffer: int = RECEIVE_BUFFER) -> None:
        self._max_frame = max_frame
        self._buffer = bytearray(receive_buffer)
        self._view = memoryview(self._buffer)
        self._start = 0
        self._end = 0
        self._large: bytearray | None = None
        self._large_filled = 0

    def get_buffer(self) -> memoryview:
        """Where the next received bytes go (never empty)."""
        if self._large is not None:
            return memoryview(self._large)[self._large_filled :]
        if self._end == len(self._buffer):
            self._make_room()
        return self._view[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        if self._large is not None:
            self._large_filled += nbytes
        else:
            self._end += nbytes

    def next_frame(self) -> bytes | bytearray | None:
        """The next whole frame, or None until more bytes arrive."""
        if self._large is not None:
            if self._large_filled < len(self._large):
                return None
            frame, self._large = self._large, None
            return frame
        available = self._end - self._start
        if available < 4:
            self._reset_if_empty()
            return None
        (size,) = SIZE_PREFIX.unpack_from(self._buffer, self._start)
        if size < 0 or size > self._max_frame:
            raise FrameTooLarge(size, self._max_frame)
        if available - 4 >= size:
            begin = self._start + 4
            self._start = begin + size
            frame = bytes(self._view[begin : begin + size])
            self._reset_if_empty()
            return frame
        if 4 + size > len(self._buffer):
            # Too big for the shared buffer: give it its own, seeded with what has arrived so far.
            have = available - 4
            large = bytearray(size)
            large[:have] = self._view[self._start + 4 : self._end]
            self._start = self._end = 0
            self._large, self._large_filled = large, have
            return large if have == size else None
        return None

    def _reset_if_empty(self) -> None:
        if self._start == self._end:
            self._start = self._end = 0

    def _make_room(self) -> None:
        pending = bytes(self._view[self._start : self._end])
        size = len(self._buffer)
        if self._start == 0:
            # Full of whole small frames nobody has taken yet (reading paused for backpressure while
            # the kernel still delivered a last chunk): grow rather than refuse bytes.
            size *= 2
        # A fresh buffer rather than shifting in place: a view handed out earlier may still be alive.
        self._buffer = bytearray(size)
        self._view = memoryview(self._buffer)
        self._buffer[: len(pending)] = pending
        self._start, self._end = 0, len(pending)

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as frames."""
        if self._large is not None:
            return self._large_filled
        return self._end - self._start
