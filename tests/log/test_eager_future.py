"""EagerFuture (eager_future.py): on_settled callbacks run inside the settling call, not a loop turn later;
``batched``/``after_batch``: actions deferred to the end of the callback that settles many at once;
``mapped``: a function of an awaitable's result, without a coroutine around the awaitable."""

from __future__ import annotations

import asyncio
import inspect

import pytest

from eoslog.log.eager_future import EagerFuture, after_batch, batched, mapped


def test_on_settled_runs_inside_set_result_and_done_callbacks_a_turn_later():
    async def scenario():
        future = EagerFuture()
        seen = []
        future.on_settled(lambda f: seen.append(("eager", f.result())))
        future.add_done_callback(lambda f: seen.append(("done", f.result())))
        future.set_result(7)
        assert seen == [("eager", 7)]  # the done callback waits for the loop
        await asyncio.sleep(0)
        assert seen == [("eager", 7), ("done", 7)]
        assert await future == 7

    asyncio.run(scenario())


def test_on_settled_after_the_fact_runs_at_once_and_sees_exceptions_and_cancels():
    async def scenario():
        failed, cancelled = EagerFuture(), EagerFuture()
        failed.set_exception(ValueError("x"))
        seen = []
        failed.on_settled(lambda f: seen.append(type(f.exception()).__name__))
        cancelled.on_settled(lambda f: seen.append(f.cancelled()))
        assert cancelled.cancel()
        assert not cancelled.cancel()  # a second cancel settles nothing and calls nobody again
        assert seen == ["ValueError", True]

    asyncio.run(scenario())


def test_a_failing_callback_is_reported_and_the_others_still_run():
    async def scenario():
        reported = []
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: reported.append(context))
        future = EagerFuture()
        seen = []
        future.on_settled(lambda f: 1 / 0)
        future.on_settled(lambda f: seen.append("second"))
        future.set_result(None)
        assert seen == ["second"]
        assert [type(c["exception"]) for c in reported] == [ZeroDivisionError]
        assert reported[0]["future"] is future

    asyncio.run(scenario())


def test_after_batch_defers_to_the_end_of_the_outermost_batched_call():
    seen = []

    @batched
    def inner():
        assert after_batch(lambda: seen.append("inner's action"))
        seen.append("inner")

    @batched
    def outer():
        assert after_batch(lambda: seen.append("outer's action"))
        inner()  # nested: its action waits for the outer call's end, in order of registration
        seen.append("outer")

    outer()
    assert seen == ["inner", "outer", "outer's action", "inner's action"]
    assert not after_batch(lambda: seen.append("never"))  # outside any batch: the caller acts itself
    assert "never" not in seen


def test_deferred_actions_run_when_the_batch_raises_and_one_failing_action_does_not_stop_the_rest(caplog):
    seen = []

    @batched
    def failing():
        after_batch(lambda: 1 / 0)
        after_batch(lambda: seen.append("second"))
        raise ValueError("the batch itself fails")

    with pytest.raises(ValueError):
        failing()
    assert seen == ["second"]
    assert "failed" in caplog.text and "ZeroDivisionError" in caplog.text
    assert not after_batch(lambda: None)  # the failed batch left no batch open behind it


async def _double(value):
    await asyncio.sleep(0)
    return 2 * value


async def _fail():
    await asyncio.sleep(0)
    raise ValueError("refused")


def test_mapped_applies_the_function_and_passes_exceptions_on():
    async def scenario():
        assert await mapped(_double(3), lambda v: v + 1) == 7
        with pytest.raises(ValueError, match="refused"):
            await mapped(_fail(), lambda v: v)
        with pytest.raises(KeyError):  # the function's own failure is the future's outcome
            await mapped(_double(1), lambda v: {}[v])

    asyncio.run(scenario())



class _Stop(BaseException):
    pass


async def _stop():
    await asyncio.sleep(0)
    raise _Stop()


def test_mapped_on_exception_answers_for_exceptions_but_not_for_other_base_exceptions():
    """The dispatcher's use: a handler's failure becomes its error response; what is not an Exception
    (or what the error response itself raises, e.g. a hang-up) stays the future's exception."""

    async def scenario():
        assert await mapped(_fail(), lambda v: v, lambda exc: f"error: {exc}") == "error: refused"

        def hang_up(exc):
            raise ConnectionAbortedError("no error response")

        with pytest.raises(ConnectionAbortedError):
            await mapped(_fail(), lambda v: v, hang_up)
        with pytest.raises(_Stop):
            await mapped(_stop(), lambda v: v, lambda exc: "never")

    asyncio.run(scenario())

def test_mapped_cancelled_before_its_awaitable_starts_closes_the_coroutine():
    """The case a coroutine around the awaitable gets wrong: cancelled before the task's first step, the
    wrapper's coroutine is closed but the awaitable inside it is never started (RuntimeWarning when
    collected). ``mapped`` runs the awaitable as the task's own coroutine, which the cancellation closes."""

    async def scenario():
        coroutine = _double(1)
        future = mapped(coroutine, lambda v: v)
        future.cancel()  # before the loop ran anything
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert inspect.getcoroutinestate(coroutine) == inspect.CORO_CLOSED

        async def wrapped():  # what it replaces, for contrast: the inner coroutine is left unstarted
            return await inner

        inner = _double(1)
        task = asyncio.ensure_future(wrapped())
        task.cancel()
        await asyncio.sleep(0)
        assert task.cancelled()
        assert inspect.getcoroutinestate(inner) == inspect.CORO_CREATED
        inner.close()  # no warning from the contrast itself

    asyncio.run(scenario())


def test_mapped_cancel_cancels_the_awaitable_and_an_eager_one_settles_it_in_the_same_call():
    async def scenario():
        pending = asyncio.get_running_loop().create_future()
        future = mapped(pending, lambda v: v)
        future.cancel()
        await asyncio.sleep(0)
        assert pending.cancelled()

        eager = EagerFuture()
        future = mapped(eager, lambda v: v * 10)
        seen = []
        future.on_settled(lambda f: seen.append(f.result()))
        eager.set_result(4)
        assert seen == [40]  # inside set_result, not a loop turn later

    asyncio.run(scenario())
