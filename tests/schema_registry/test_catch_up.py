"""How the broker's wait for a lagging copy of _schemas shares its rounds (server/schema_validation.py
CatchUp), over a stand-in for the store whose catch_up blocks until the test lets it go. The wait with a
real broker, registry and producer is test_validation_from_schemas_topic.py."""

from __future__ import annotations

import asyncio
import threading

from eoslog.server.schema_validation import CatchUp


class HeldStore:
    """catch_up blocks (in CatchUp's thread) until ``release``; counts the rounds that asked."""

    topic = "_schemas"

    def __init__(self, fail: bool = False) -> None:
        self.asked = 0
        self.released = threading.Event()
        self.fail = fail

    def catch_up(self, timeout_s: float) -> None:
        self.asked += 1
        if not self.released.wait(timeout_s):
            raise TimeoutError("held")
        if self.fail:
            raise RuntimeError("the reader failed")


async def _until(condition) -> None:
    while not condition():
        await asyncio.sleep(0.001)


def test_refusals_together_share_a_round_and_a_later_one_starts_the_next():
    async def scenario():
        store = HeldStore()
        catch_up = CatchUp(store, timeout_s=10)
        first, second = catch_up(), catch_up()  # before the round asked for the end offset
        assert first is second
        await asyncio.wait_for(_until(lambda: store.asked == 1), 10)  # the round asked for the end offset
        third = catch_up()  # its registration may be newer than that offset: a round of its own
        assert third is not first
        assert not first.done()
        store.released.set()
        await asyncio.wait_for(asyncio.gather(first, third), 10)
        return store.asked, catch_up.rounds

    assert asyncio.run(scenario()) == (2, 2)


def test_a_round_ends_at_its_deadline_or_failure_and_the_batch_is_checked_again():
    async def scenario(store, timeout_s):
        catch_up = CatchUp(store, timeout_s=timeout_s)
        await asyncio.wait_for(catch_up(), 10)  # done, not raised: the caller checks the batch again

    asyncio.run(scenario(HeldStore(), 0.2))  # never released: the deadline ends it
    failing = HeldStore(fail=True)
    failing.released.set()
    asyncio.run(scenario(failing, 5))
