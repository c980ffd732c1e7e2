"""A replica fetcher stops when told, even if its loop misses the cancellation. Python 3.11's
asyncio.wait_for returns the inner outcome instead of raising CancelledError when the inner request
finishes as the cancel arrives. A verify run hit that after a SIGTERM: the fetcher kept retrying a
dead leader and the broker's shutdown waited for it for good."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from eoslog.cluster.broker_client import BrokerConnectionError
from eoslog.cluster.replica_fetcher import ReplicaFetcher


def test_stop_returns_even_when_the_loop_swallows_the_cancellation():
    async def scenario() -> list[str]:
        manager = SimpleNamespace(broker_id=3, config=SimpleNamespace(replica_fetch_backoff_ms=1, link=None))
        fetcher = ReplicaFetcher(manager, leader=2, host="127.0.0.1", port=9)
        inside = asyncio.Event()
        swallowed: list[str] = []

        async def request_that_loses_the_cancel(states) -> None:
            inside.set()
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                if swallowed:
                    raise  # only the first one is lost
                swallowed.append("cancel")  # what 3.11's wait_for does when its inner request just failed
            raise BrokerConnectionError("127.0.0.1:9: refused")

        fetcher._truncate = request_that_loses_the_cancel
        fetcher.partitions[("t", 0)] = SimpleNamespace(delayed_until=0.0, truncating=True, partition=None)
        fetcher.start()
        await asyncio.wait_for(inside.wait(), 5)
        stopping = asyncio.ensure_future(fetcher.stop())
        done, _ = await asyncio.wait([stopping], timeout=5)
        # Before the fix the loop went round again into a new request, and stop() waited for good.
        assert stopping in done, "stop() did not return within 5 s"
        assert fetcher._task.done()
        return swallowed

    assert asyncio.run(scenario()) == ["cancel"]
