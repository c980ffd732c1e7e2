"""EagerFuture: an asyncio Future whose ``on_settled`` callbacks run at once, in the call that settles it.

An asyncio future runs its done callbacks at the loop's *next* turn. On a loop serving many clients a turn
is every readable socket's frames, tens of milliseconds under load, and an acks=all Produce with fsync on
ack used to pass four such hand-offs after its syncfs round returned (the round's future, the Produce
answer, the encoded response, the write): docs/benchmarks.md, "Issue 16 on a quiet machine". The request
path chains those steps with ``on_settled`` instead, so the answer is encoded within the turn that
completes the round. The write waits only for the end of the callback that settled the round
(``batched`` below): server/network.py sends all the responses a round made ready on one connection in
one write, without waiting for the loop's next turn.

``on_settled`` callbacks take the future, like done callbacks, and must not block. They run inside
``set_result``/``set_exception``/``cancel``, so whoever settles such a future must have its own state in
order first (log/flusher.py finishes its bookkeeping before it settles its waiters). An exception in one
callback goes to the loop's exception handler, as a done callback's would, and the others still run.
Awaiting and ``add_done_callback`` work as on any future.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

log = logging.getLogger(__name__)


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


def mapped(awaitable: Any, function: Callable[[Any], Any],
           on_exception: Callable[[Exception], Any] | None = None) -> EagerFuture:
    """An EagerFuture of ``function(result)`` for ``awaitable``, which runs as a task of its own from now on
    (a future stays itself). An exception becomes ``on_exception(exc)`` when given, else the future's
    exception, as does one that ``function`` or ``on_exception`` raises; a cancellation is passed on, and
    cancelling the returned future cancels the awaitable. An EagerFuture awaitable settles the returned
    one in the same call (``on_settled``); anything else a loop turn later.

    Why not ``async def later(): return function(await awaitable)``: a task cancelled before its first step
    (a request dispatched just as its connection is lost, server/network.py) never starts its coroutine,
    so a coroutine that coroutine wraps is never started either and is collected unawaited, with a
    RuntimeWarning. Cancelling a task before it starts closes its own coroutine cleanly."""
    inner = asyncio.ensure_future(awaitable)
    out = EagerFuture(loop=inner.get_loop())

    def settle(done: asyncio.Future) -> None:
        if out.done():
            return
        if done.cancelled():
            out.cancel()
            return
        try:
            exc = done.exception()
            if exc is None:
                result = function(done.result())
            elif on_exception is not None and isinstance(exc, Exception):
                result = on_exception(exc)
            else:
                raise exc
        except BaseException as failure:  # noqa: BLE001 - the future's outcome, raised to whoever awaits it
            out.set_exception(failure)
            return
        out.set_result(result)

    if isinstance(inner, EagerFuture):
        inner.on_settled(settle)
    else:
        inner.add_done_callback(settle)
    out.add_done_callback(lambda o: inner.cancel() if o.cancelled() else None)
    return out


# ---- work deferred to the end of the callback that settles many futures at once ----------------------------
#
# One callback can make many answers ready: a syncfs round's completion settles every Produce it covered,
# a read of a socket dispatches every request in it. Their writes are best made once that callback is done
# (one send per connection, not one per answer) but not at the loop's next turn, which under load is a
# whole pass over every readable socket later. ``batched`` marks such callbacks; ``after_batch`` defers an
# action to the end of the outermost one running. Thread-local, since each broker thread has its own loop.

_batch = threading.local()
_F = TypeVar("_F", bound=Callable[..., Any])


def batched(function: _F) -> _F:
    """``function``, running the actions ``after_batch`` registers meanwhile once it returns (or raises)."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if getattr(_batch, "actions", None) is not None:  # inside another batch: that one runs them
            return function(*args, **kwargs)
        actions: list[Callable[[], Any]] = []
        _batch.actions = actions
        try:
            return function(*args, **kwargs)
        finally:
            _batch.actions = None
            for action in actions:
                try:
                    action()
                except Exception:  # one failing action must not strand the others
                    log.exception("action deferred to the end of %s failed", function.__qualname__)

    return wrapper  # type: ignore[return-value]


def after_batch(action: Callable[[], Any]) -> bool:
    """Runs ``action`` when the running ``batched`` callback ends; False (nothing done) outside one."""
    actions = getattr(_batch, "actions", None)
    if actions is None:
        return False
    actions.append(action)
    return True
