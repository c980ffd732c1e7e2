"""The controller election against a real ZooKeeper, with cluster views delivered in the orders the
view loop can produce: a view read before our ``/controller`` znode existed may arrive after we won.

Found in CI: broker 2 won the election, then a view read a moment earlier (no controller) made it resign
without deleting its znode; every later view named broker 2 as controller, so no broker stood again and
a dead leader was never replaced."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

import pytest

from eoslog.cluster.controller import Controller
from eoslog.cluster.zk.client import ZooKeeper


@contextlib.contextmanager
def zk_client(zookeeper) -> Iterator[ZooKeeper]:
    client = ZooKeeper(zookeeper.connect_string_with_chroot("/election"), 10_000)
    client.start()
    try:
        yield client
    finally:
        client.stop()


@pytest.fixture
def two_brokers(zookeeper):
    with zk_client(zookeeper) as zk1, zk_client(zookeeper) as zk2:
        yield (Controller(zk1, 1, auto_leader_rebalance=False), Controller(zk2, 2, auto_leader_rebalance=False))


def test_a_view_older_than_our_election_does_not_depose_us(two_brokers):
    c1, c2 = two_brokers

    async def run():
        before = c1.zk.read_view()
        assert before.controller_id == -1
        await c1.on_view(before)
        assert c1.active and c1.epoch == 1
        await c1.on_view(before)  # delivered late: read before the znode was created
        assert c1.active, "a stale view deposed the controller"
        after = c1.zk.read_view()
        assert after.controller_id == 1
        await c1.on_view(after)
        await c2.on_view(c2.zk.read_view())
        assert c1.active and not c2.active

    asyncio.run(run())


def test_a_controller_whose_znode_another_broker_holds_resigns(two_brokers):
    c1, c2 = two_brokers

    async def run():
        await c1.on_view(c1.zk.read_view())
        assert c1.active
        c1.zk.resign_controller(1)  # the znode goes (as it would with our session)
        await c2.on_view(c2.zk.read_view())
        assert c2.active and c2.epoch == 2
        await c1.on_view(c1.zk.read_view())
        assert not c1.active

    asyncio.run(run())


def test_a_znode_we_hold_without_acting_on_it_is_given_up(two_brokers):
    c1, c2 = two_brokers

    async def run():
        # An election that created the znode but never finished (the epoch write failed, say).
        assert c1.zk.try_become_controller(1) is not None
        assert not c1.active
        await c1.on_view(c1.zk.read_view())
        assert c1.zk.controller_owner(1) == "none"
        await c2.on_view(c2.zk.read_view())
        assert c2.active, "the other broker could not stand for election"

    asyncio.run(run())
