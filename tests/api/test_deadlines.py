"""api/_deadlines.py: acks=all Produce deadlines kept in per-timeout FIFO queues with one timer each.

Unit tests on a real event loop with short timeouts; the interop side (a wait that outlives the request's
timeout is answered REQUEST_TIMED_OUT over TCP) is tests/server/test_produce_acks_wait.py.
"""

from __future__ import annotations

import asyncio

from eoslog.api._deadlines import Deadlines, deadlines_for


def _run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 10))


def test_expires_no_earlier_than_its_timeout_and_once():
    async def main():
        loop = asyncio.get_running_loop()
        deadlines = Deadlines(loop)
        fired: list[float] = []
        done = loop.create_future()
        started = loop.time()

        def expired():
            fired.append(loop.time())
            done.set_result(None)

        deadlines.add(50, expired)
        await done
        assert fired[0] - started >= 0.050
        await asyncio.sleep(0.06)  # nothing more may fire: the entry is gone
        assert len(fired) == 1
        assert len(deadlines) == 0

    _run(main())


def test_cancelled_entries_never_fire_and_are_dropped():
    async def main():
        loop = asyncio.get_running_loop()
        deadlines = Deadlines(loop)
        fired: list[str] = []
        last = loop.create_future()
        first = deadlines.add(30, lambda: fired.append("first"))
        deadlines.add(30, lambda: fired.append("second"))
        deadlines.add(30, lambda: last.set_result(fired.append("third")))
        first.cancel()
        await last
        assert fired == ["second", "third"]
        assert len(deadlines) == 0

    _run(main())


def test_a_queue_of_finished_requests_stays_short():
    """Requests that finish before their deadline leave the queue on the next add, not at expiry."""
    async def main():
        deadlines = Deadlines(asyncio.get_running_loop())
        for _ in range(1000):
            deadlines.add(30_000, lambda: None).cancel()
        assert len(deadlines) == 1

    _run(main())


def test_timeouts_of_different_lengths_expire_in_deadline_order():
    async def main():
        loop = asyncio.get_running_loop()
        deadlines = Deadlines(loop)
        order: list[int] = []
        done = loop.create_future()
        deadlines.add(80, lambda: (order.append(80), done.set_result(None)))
        deadlines.add(20, lambda: order.append(20))
        deadlines.add(0, lambda: order.append(0))
        deadlines.add(-5, lambda: order.append(-5))  # a negative timeout counts as 0
        await done
        assert order[:2] in ([0, -5], [-5, 0]) and order[2:] == [20, 80]

    _run(main())


def test_an_expiry_may_add_another_deadline():
    async def main():
        loop = asyncio.get_running_loop()
        deadlines = Deadlines(loop)
        done = loop.create_future()
        started = loop.time()
        deadlines.add(20, lambda: deadlines.add(20, lambda: done.set_result(loop.time())))
        deadlines.add(20, lambda: None)  # a second live entry in the same queue while the first fires
        finished = await done
        assert finished - started >= 0.040
        assert len(deadlines) == 0

    _run(main())


def test_one_deadlines_object_per_loop():
    async def main():
        loop = asyncio.get_running_loop()
        assert deadlines_for(loop) is deadlines_for(loop)
        return deadlines_for(loop)

    first = asyncio.run(main())
    second = asyncio.run(main())
    assert first is not second
