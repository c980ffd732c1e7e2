"""What no client may exceed: request memory across connections, and connection counts.

Contract
- :class:`MemoryPool` is ``queued.max.request.bytes``, as Kafka's MemoryPool: one budget for the bytes
  of requests being received. A frame too big for a connection's small receive buffer gets a buffer of
  its own that grows with the bytes that actually arrive (server/framing.py), and every growth is
  reserved here first. It is all given back when the frame is handed to the dispatcher or the
  connection closes. A connection the pool cannot serve stops reading and waits. TCP flow control then
  holds its client back.
- No deadlock: half-received frames could each wait for memory the others hold. So the oldest frame
  in progress may always grow, even past the budget. It finishes, and then the next oldest has that
  right. The bound is the budget plus one frame (at most ``socket.request.max.bytes``).
- Frames small enough for the receive buffer need no reservation, so small requests keep flowing
  while large ones wait.
- :class:`ConnectionQuotas` is ``max.connections``, ``max.connections.per.ip`` and
  ``max.connections.per.ip.overrides``. A connection over a limit is closed as soon as it is accepted,
  before it costs a buffer.
- No I/O and no event loop: the network layer (server/network.py) calls in and schedules the wake-ups.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

UNBOUNDED = -1


class MemoryPool:
    def __init__(self, capacity: int = UNBOUNDED,
                 schedule: Callable[[Callable[[], None]], object] | None = None) -> None:
        self.capacity = capacity
        self.used = 0
        self._waiters: deque[Callable[[], None]] = deque()
        self._frames: dict[int, None] = {}  # tickets of the frames in progress, oldest first
        self._next_ticket = 0
        # How a waiter is woken: the network layer passes loop.call_soon, so a waiter never runs inside
        # the call stack of the connection that gave memory back.
        self.schedule = schedule or (lambda callback: callback())

    @property
    def bounded(self) -> bool:
        return self.capacity != UNBOUNDED

    def open_frame(self) -> int:
        """A ticket for a frame starting now: its place in the oldest-frame order."""
        self._next_ticket += 1
        self._frames[self._next_ticket] = None
        return self._next_ticket

    def close_frame(self, ticket: int) -> None:
        """The frame is complete or abandoned; the next oldest may now overcommit."""
        self._frames.pop(ticket, None)

    def try_reserve(self, size: int, ticket: int | None = None) -> bool:
        """Reserves ``size`` bytes if they fit, or if ``ticket`` is the oldest frame in progress."""
        if self.bounded and self.used + size > self.capacity and not (
                ticket is not None and self._frames and ticket == next(iter(self._frames))):
            return False
        self.used += size
        return True

    def force(self, size: int, ticket: int | None = None) -> bool:
        """Reserves ``size`` even past the budget: for a read already under way, which cannot be refused."""
        self.used += size
        return True

    def release(self, size: int) -> None:
        """Gives ``size`` back and wakes every waiter, in arrival order; each tries again and may wait
        again."""
        self.used -= size
        woken = list(self._waiters)
        self._waiters.clear()
        for callback in woken:
            self.schedule(callback)

    def wait(self, callback: Callable[[], None]) -> None:
        self._waiters.append(callback)

    def forget(self, callback: Callable[[], None]) -> None:
        try:
            self._waiters.remove(callback)
        except ValueError:
            pass

    @property
    def waiting(self) -> int:
        return len(self._waiters)


def parse_overrides(text: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides``: ``host:count,host:count`` (Kafka's format)."""
    overrides: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        host, sep, count = item.rpartition(":")
        if not sep or not host or not count.isdigit():
            raise ValueError(f"max.connections.per.ip.overrides: expected host:count, got {item!r}")
        overrides[host] = int(count)
    return overrides


class ConnectionQuotas:
    def __init__(self, max_connections: int | None = None, max_per_ip: int | None = None,
                 per_ip_overrides: dict[str, int] | None = None) -> None:
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.per_ip_overrides = dict(per_ip_overrides or {})
        self.total = 0
        self.by_ip: dict[str, int] = {}

    def admit(self, ip: str) -> str | None:
        """Counts the connection in and returns None, or returns why it is refused (and counts nothing)."""
        limit = self.per_ip_overrides.get(ip, self.max_per_ip)
        if limit is not None and self.by_ip.get(ip, 0) >= limit:
            return f"max.connections.per.ip={limit} reached for {ip}"
        if self.max_connections is not None and self.total >= self.max_connections:
            return f"max.connections={self.max_connections} reached"
        self.total += 1
        self.by_ip[ip] = self.by_ip.get(ip, 0) + 1
        return None

    def release(self, ip: str) -> None:
        self.total -= 1
        left = self.by_ip.get(ip, 0) - 1
        if left > 0:
            self.by_ip[ip] = left
        else:
            self.by_ip.pop(ip, None)
