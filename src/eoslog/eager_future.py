"""EagerFuture: an asyncio Future whose ``on_settled`` callbacks run at once, in the call that settles it.

An asyncio future runs its done callbacks at the loop's *next* turn. On a loop serving many clients a turn
is every readable socket's frames, tens of milliseconds under load, and an acks=all Produce with fsync on
ack used to pass four such hand-offs after its syncfs round returned (the round's future, the Produce
answer, the encoded response, the write): docs/benchmarks.md, "Issue 16 on a quiet machine". The request
path chains those steps with ``on_settled`` instead, so the answer is encoded within the turn that
completes the round; the write still waits one turn, on purpose (server/network.py batches the responses
a round made ready into one send).

``on_settled`` callbacks take the future, like done callbacks, and must not block. They run inside
``set_result``/``set_exception``/``cancel``, so whoever settles such a future must have its own state in
order first (log/flusher.py finishes its bookkeeping before it settles its waiters). An exception in one
callback goes to the loop's exception handler, as a done callback's would, and the others still run.
Awaiting and ``add_done_callback`` work as on any future.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any


class EagerFuture(asyncio.Future):
    def __init__(self, *, loop: asyncio.AbstractEventLoop | None = None) -> None:
        super().__init__(loop=loop)
        self._eager: list[Callable[[EagerFuture], Any]] | None = None

    def on_settled(self, callback: Callable[[EagerFuture], Any]) -> None:
        """``callback(self)`` as soon as this future is settled; at once when it already is."""
        if self.done():
            self._call(callback)
        elif self._eager is None:
            self._eager = [callback]
        else:
            self._eager.append(callback)

    def set_result(self, result: Any) -> None:
        super().set_result(result)
        self._settled()

    def set_exception(self, exception: BaseException | type[BaseException]) -> None:
        super().set_exception(exception)
        self._settled()

    def cancel(self, msg: Any = None) -> bool:
        if not super().cancel(msg):
            return False
        self._settled()
        return True

    def _settled(self) -> None:
        callbacks, self._eager = self._eager, None
        for callback in callbacks or ():
            self._call(callback)

    def _call(self, callback: Callable[[EagerFuture], Any]) -> None:
        try:
            callback(self)
        except Exception as exc:  # noqa: BLE001 - reported like a failing done callback; the others still run
            self.get_loop().call_exception_handler(
                {"message": f"Exception in on_settled callback {callback!r}", "exception": exc, "future": self})
