"""Request deadlines without a timer per request (acks=all Produce waiting for its high watermark).

Contract
- ``Deadlines.add(timeout_ms, on_expiry)`` returns a :class:`Deadline`; ``on_expiry()`` runs once, on
  the loop, no earlier than ``timeout_ms`` after ``add``, unless ``Deadline.cancel()`` ran first.
- Requests with the same timeout share one FIFO queue: their deadlines come in the order they were added,
  so only the oldest live entry needs a timer. One ``call_at`` per queue is armed at that entry's
  deadline; when it fires it expires what is due, drops what was cancelled and re-arms for the new oldest.
- A cancelled entry lets go of its callback at once; the small entry itself leaves its queue when it
  reaches the front (on the next ``add`` or firing), so a queue holds about the requests still waiting.
- Event-loop thread only.

Why: a ``call_later`` per acks=all request (a timer handle made, armed, cancelled and closed each time)
was one of the larger items of the loop's profile at 1,000 partitions, where nearly every request waits
(docs/benchmarks.md, "Broker CPU per produced record"). Kafka keeps such requests in a purgatory with a
timing wheel for the same reason.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import deque
from collections.abc import Callable


class Deadline:
    __slots__ = ("at", "on_expiry")

    def __init__(self, at: float, on_expiry: Callable[[], None]) -> None:
        self.at = at
        self.on_expiry: Callable[[], None] | None = on_expiry

    def cancel(self) -> None:
        self.on_expiry = None


class _Queue:
    __slots__ = ("entries", "timer")

    def __init__(self) -> None:
        self.entries: deque[Deadline] = deque()
        self.timer: asyncio.TimerHandle | None = None


class Deadlines:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._queues: dict[int, _Queue] = {}

    def add(self, timeout_ms: int, on_expiry: Callable[[], None]) -> Deadline:
        timeout_ms = max(timeout_ms, 0)
        queue = self._queues.get(timeout_ms)
        if queue is None:
            queue = self._queues[timeout_ms] = _Queue()
        entries = queue.entries
        while entries and entries[0].on_expiry is None:
            entries.popleft()
        deadline = Deadline(self._loop.time() + timeout_ms / 1000, on_expiry)
        entries.append(deadline)
        if queue.timer is None:
            queue.timer = self._loop.call_at(deadline.at, self._fire, queue)
        return deadline

    def _fire(self, queue: _Queue) -> None:
        # queue.timer stays set while firing, so an add from an on_expiry does not arm a second timer.
        entries = queue.entries
        now = self._loop.time()
        while entries:
            head = entries[0]
            if head.on_expiry is None:
                entries.popleft()
            elif head.at <= now:
                entries.popleft()
                on_expiry, head.on_expiry = head.on_expiry, None
                on_expiry()
            else:
                break
        queue.timer = self._loop.call_at(entries[0].at, self._fire, queue) if entries else None

    def __len__(self) -> int:
        """Entries held (live or cancelled but not yet dropped), for tests."""
        return sum(len(queue.entries) for queue in self._queues.values())


_BY_LOOP: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Deadlines] = weakref.WeakKeyDictionary()
# A broker has one loop: the last one answers without the weak dictionary (a weakref made per lookup).
# It keeps at most one loop alive after that loop is done (a test's), until another loop asks.
_last: Deadlines | None = None


def deadlines_for(loop: asyncio.AbstractEventLoop) -> Deadlines:
    global _last
    deadlines = _last
    if deadlines is not None and deadlines._loop is loop:
        return deadlines
    deadlines = _BY_LOOP.get(loop)
    if deadlines is None:
        deadlines = _BY_LOOP[loop] = Deadlines(loop)
    _last = deadlines
    return deadlines
