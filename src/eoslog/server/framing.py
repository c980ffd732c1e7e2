"""Kafka request framing without I/O: bytes in (through buffers we hand out), whole frames out.

Built for ``asyncio.BufferedProtocol``: the transport reads straight into the memory ``get_buffer``
returns, so a request is copied at most once on its way in. What a connection costs follows what its
client has actually sent, never what it announces:
- Small requests share one small receive buffer and are copied out of it. The buffer is dropped as
  soon as every byte in it has been taken, so an idle connection holds none.
- A request larger than the receive buffer gets a buffer of its own. The buffer starts at
  ``large_start`` bytes (or the whole size, if smaller) and doubles as bytes arrive, up to the size in
  the length prefix. The kernel writes into it directly, and the dispatcher, then the log, read from
  it. It grows in place where CPython allows (``_grow_in_place``), so a 1 MiB Produce request is
  neither zero-filled nor copied on the way in. A prefix announcing 100 MB followed by a trickle
  allocates what the trickle brings.
- Every allocation or growth of a large frame's buffer is reserved first from the broker's
  ``queued.max.request.bytes`` pool (server/limits.py). If the pool refuses, ``next_frame`` raises
  :class:`NeedMemory` and the caller stops reading until memory comes back.

A frame is a 4-byte big-endian size followed by that many bytes; ``next_frame`` returns the bytes after
the size. A size below zero or above the limit raises :class:`FrameTooLarge` (the caller hangs up: Kafka
cannot skip a frame it will not read).
"""

from __future__ import annotations

import struct

from eoslog.server.limits import MemoryPool

SIZE_PREFIX = struct.Struct(">i")
RECEIVE_BUFFER = 16 * 1024
LARGE_START = 64 * 1024


_resize = None  # CPython's PyByteArray_Resize through ctypes, once looked up; False where there is none


def _grow_in_place(buffer: bytearray, size: int) -> bool:
    """Grows ``buffer`` to ``size`` bytes without writing the new ones; False if it cannot.

    ``bytearray(size)`` zero-fills every byte and the bytes received so far are then copied across:
    for a 1 MiB request grown from 64 KiB, about 2 MiB written and 1 MiB copied before the kernel writes
    the request itself (8 % of the broker's CPU at 1 KiB records, docs/benchmarks.md). CPython's own
    resize reallocates instead, which keeps the received bytes where they are when the heap has room
    after them (and moves an mmap'd buffer by remapping it), and leaves the new bytes as they were. They
    are never read: a frame is returned only once the kernel has written every byte of it. It refuses
    (BufferError) while a view of the buffer is alive, which is why the reader grows its buffer in
    ``get_buffer``: asyncio and uvloop both hold the view they were handed until ``buffer_updated``
    returns and drop it before asking for the next. Where a view is still alive the caller copies."""
    global _resize
    if _resize is None:
        try:
            import ctypes

            function = ctypes.pythonapi.PyByteArray_Resize
            function.argtypes = (ctypes.py_object, ctypes.c_ssize_t)
            function.restype = ctypes.c_int
            _resize = function
        except (ImportError, AttributeError, OSError):
            _resize = False
    if _resize is False:
        return False
    try:
        _resize(buffer, size)
    except BufferError:
        return False
    return True


class FrameTooLarge(Exception):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"request frame of {size} bytes exceeds socket.request.max.bytes={limit}")
        self.size = size


class NeedMemory(Exception):
    """The next frame needs ``size`` bytes the pool cannot give now; call ``next_frame`` again later."""

    def __init__(self, size: int) -> None:
        super().__init__(f"waiting for {size} bytes of queued.max.request.bytes")
        self.size = size


class FrameReader:
    """Invariants: while ``_large`` is None, bytes ``[_start, _end)`` of ``_buffer`` are received but not
    yet returned as frames, and ``_buffer`` is None when there are none; while ``_large`` is set, every
    byte received belongs to that one frame of ``_large_size`` bytes, ``_large_capacity`` is exactly what
    it holds reserved in the pool, under ``_ticket``, and ``len(_large)`` is at most that: a growth is
    reserved where the pool is asked (``next_frame``) and carried out where the transport holds no view
    of the buffer (``get_buffer``), so that it can be done in place."""

    def __init__(self, max_frame: int, receive_buffer: int = RECEIVE_BUFFER, pool: MemoryPool | None = None,
                 large_start: int = LARGE_START) -> None:
        self._max_frame = max_frame
        self._receive_buffer = receive_buffer
        self._large_start = large_start
        self._pool = pool if pool is not None else MemoryPool()
        self._buffer: bytearray | None = None
        self._view: memoryview | None = None
        self._start = 0
        self._end = 0
        self._large: bytearray | None = None
        self._large_filled = 0
        self._large_size = 0
        self._large_capacity = 0
        self._ticket: int | None = None  # the large frame's place in the pool's oldest-first order

    @property
    def max_frame(self) -> int:
        return self._max_frame

    @max_frame.setter
    def max_frame(self, size: int) -> None:
        """Changes the limit for frames not yet begun (SASL listeners raise it once a client is
        authenticated: before, ``sasl.server.max.receive.size`` bounds what a stranger may send)."""
        self._max_frame = size

    def get_buffer(self) -> memoryview:
        """Where the next received bytes go (never empty)."""
        if self._large is not None:
            if self._large_filled == self._large_capacity:
                # next_frame reserves growth through the pool; reaching here means a read came first
                self._reserve_growth(self._pool.force)
            if len(self._large) < self._large_capacity:
                self._resize_large()
            return memoryview(self._large)[self._large_filled :]
        if self._buffer is None:
            self._buffer = bytearray(self._receive_buffer)
            self._view = memoryview(self._buffer)
        elif self._end == len(self._buffer):
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
            if self._large_filled < self._large_size:
                if self._large_filled == self._large_capacity and not self._reserve_growth(self._pool.try_reserve):
                    raise NeedMemory(min(self._large_size, 2 * self._large_capacity) - self._large_capacity)
                return None
            frame, self._large = self._large, None
            self._give_back(self._large_capacity)
            return frame
        available = self._end - self._start
        if available < 4:
            self._drop_if_empty()
            return None
        (size,) = SIZE_PREFIX.unpack_from(self._buffer, self._start)
        if size < 0 or size > self._max_frame:
            raise FrameTooLarge(size, self._max_frame)
        if available - 4 >= size:
            begin = self._start + 4
            self._start = begin + size
            frame = bytes(self._view[begin : begin + size])
            self._drop_if_empty()
            return frame
        if 4 + size > len(self._buffer):
            # Too big for the receive buffer: a buffer of its own, seeded with what has arrived so far.
            have = available - 4
            first = max(have, min(size, self._large_start))
            ticket = self._pool.open_frame()
            if not self._pool.try_reserve(first, ticket):
                self._pool.close_frame(ticket)
                raise NeedMemory(first)
            self._ticket = ticket
            large = bytearray(first)
            large[:have] = self._view[self._start + 4 : self._end]
            self._buffer = self._view = None
            self._start = self._end = 0
            self._large, self._large_filled, self._large_size = large, have, size
            self._large_capacity = first
            return self.next_frame() if have == size else None
        return None

    def close(self) -> None:
        """The connection is gone: every byte it held goes back."""
        held = self._large_capacity if self._large is not None else 0
        self._large = self._buffer = self._view = None
        self._start = self._end = 0
        self._give_back(held)

    def _give_back(self, reserved: int) -> None:
        """Returns a large frame's buffer (``reserved`` bytes, its length) and its place to the pool."""
        if self._ticket is not None:
            self._pool.close_frame(self._ticket)
            self._ticket = None
        if reserved:
            self._pool.release(reserved)

    def _reserve_growth(self, reserve) -> bool:
        """Doubles the large frame's capacity (up to its size) if ``reserve`` grants the difference."""
        capacity = min(self._large_size, 2 * self._large_capacity)
        if not reserve(capacity - self._large_capacity, self._ticket):
            return False
        self._large_capacity = capacity
        return True

    def _resize_large(self) -> None:
        """Makes the buffer as long as its reserved capacity: in place when it can, else by a copy."""
        if not _grow_in_place(self._large, self._large_capacity):
            grown = bytearray(self._large_capacity)
            grown[: self._large_filled] = memoryview(self._large)[: self._large_filled]
            self._large = grown

    def _drop_if_empty(self) -> None:
        if self._start == self._end:
            self._buffer = self._view = None
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

    @property
    def holding(self) -> int:
        """Bytes of buffer this reader holds now (what the connection costs beyond its socket)."""
        if self._large is not None:
            return self._large_capacity
        return len(self._buffer) if self._buffer is not None else 0
