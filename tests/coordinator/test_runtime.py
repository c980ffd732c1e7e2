"""The coordinator runtime's rules, against stand-ins for its two ports (the replica layer's leadership
and the partition registry): ownership, loading, the epoch-bump rule, timers. The shards over the real
pieces are tested in tests/groups/test_group_shard.py and through the brokers' own tests."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from eoslog.cluster.topics import InternalTopic
from eoslog.coordinator.runtime import CoordinatorRuntime, Ownership

TOPIC, OTHER = "__consumer_offsets", "__transaction_state"


class Leadership:
    def __init__(self, sole_broker: bool = False) -> None:
        self.sole_broker = sole_broker
        self.elected_here: set[tuple[str, int]] = set()
        self.listeners: dict[str, list] = {}

    def add_leadership_listener(self, topic, became_leader, resigned) -> None:
        self.listeners.setdefault(topic, []).append((became_leader, resigned))

    def elected(self, topic, index) -> bool:
        return self.sole_broker or (topic, index) in self.elected_here

    def lead(self, topic, index, epoch=1) -> None:
        """The partition takes writes here (in a new epoch): what the replica manager reports."""
        self.elected_here.add((topic, index))
        self.partitions.partitions[(topic, index)] = SimpleNamespace(leader_epoch=epoch)
        for became_leader, _ in self.listeners.get(topic, ()):
            became_leader(index)

    def resign(self, topic, index) -> None:
        self.elected_here.discard((topic, index))
        for _, resigned in self.listeners.get(topic, ()):
            resigned(index)


class Partitions:
    def __init__(self) -> None:
        self.partitions: dict = {}
        self.infos: dict = {}
        self.topics = SimpleNamespace(get=self.infos.get)
        self.specs: dict = {}

    def register_internal_topic(self, spec) -> None:
        self.specs[spec.name] = spec

    def ensure_internal_topic(self, name):
        self.infos[name] = SimpleNamespace(partitions=3)
        return self.infos[name]


class Shard:
    def __init__(self, log: list, topic: str) -> None:
        self.log = log
        self.topic = topic
        self.deadline: int | None = None
        self.timed = 0

    def load(self, partitions) -> None:
        self.log.append(("load", sorted(partitions)))

    def unload(self, index) -> None:
        self.log.append(("unload", index))

    def next_deadline_ms(self):
        return self.deadline

    def on_deadline(self, now):
        self.timed += 1
        self.deadline = None
        return None

    async def stop(self) -> None:
        self.log.append(("stop", self.topic))


def make(sole_broker: bool = False):
    partitions = Partitions()
    leadership = Leadership(sole_broker)
    leadership.partitions = partitions
    runtime = CoordinatorRuntime(partitions, leadership)
    log: list = []
    shards = {}

    def factory(topic):
        def build():
            shards[topic] = Shard(log, topic)
            log.append(("built", topic))
            return shards[topic]
        return build

    runtime.register(InternalTopic(TOPIC, 3), factory(TOPIC))
    runtime.register(InternalTopic(OTHER, 3), factory(OTHER))
    return runtime, leadership, partitions, log, shards


async def turns(n: int = 5) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def test_ownership_follows_leadership_and_loading():
    async def scenario():
        runtime, leadership, partitions, log, _ = make()
        partitions.infos[TOPIC] = SimpleNamespace(partitions=3)
        runtime.start()
        assert runtime.ownership(TOPIC, 1) is Ownership.NOT_COORDINATOR
        leadership.elected_here.add((TOPIC, 1))  # named leader, not taking writes yet
        assert runtime.ownership(TOPIC, 1) is Ownership.LOAD_IN_PROGRESS
        leadership.lead(TOPIC, 1)
        assert runtime.ownership(TOPIC, 1) is Ownership.LOAD_IN_PROGRESS  # queued, not read yet
        assert log == []  # never inside the leadership callback
        await turns()
        assert log == [("built", TOPIC), ("load", [1])]
        assert runtime.ownership(TOPIC, 1) is Ownership.OWNED and runtime.owned(TOPIC) == [1]
        leadership.resign(TOPIC, 1)
        assert log[-1] == ("unload", 1)
        assert runtime.ownership(TOPIC, 1) is Ownership.NOT_COORDINATOR
        leadership.lead(TOPIC, 1, epoch=2)  # back here after someone else led it: read again
        await turns()
        assert log[-1] == ("load", [1])

    asyncio.run(scenario())


def test_a_new_epoch_of_a_leadership_that_never_stopped_keeps_the_state():
    async def scenario():
        runtime, leadership, partitions, log, _ = make()
        partitions.infos[TOPIC] = SimpleNamespace(partitions=3)
        runtime.start()
        leadership.lead(TOPIC, 0, epoch=1)
        await turns()
        leadership.lead(TOPIC, 0, epoch=2)
        await turns()
        assert log == [("built", TOPIC), ("load", [0])]
        assert runtime.ownership(TOPIC, 0) is Ownership.OWNED

    asyncio.run(scenario())


def test_nothing_loads_before_start_then_each_shard_loads_its_partitions_together_in_registration_order():
    async def scenario():
        runtime, leadership, partitions, log, _ = make()
        partitions.infos[TOPIC] = partitions.infos[OTHER] = SimpleNamespace(partitions=3)
        leadership.lead(OTHER, 2)
        leadership.lead(TOPIC, 0)
        leadership.lead(OTHER, 0)
        leadership.lead(TOPIC, 2)
        await turns()
        assert log == []  # the broker does not serve yet
        runtime.start()
        await turns()
        assert log == [("built", TOPIC), ("load", [0, 2]), ("built", OTHER), ("load", [0, 2])]

    asyncio.run(scenario())


def test_a_partition_resigned_before_its_load_is_not_loaded():
    async def scenario():
        runtime, leadership, partitions, log, _ = make()
        partitions.infos[TOPIC] = SimpleNamespace(partitions=3)
        runtime.start()
        leadership.lead(TOPIC, 0)
        leadership.resign(TOPIC, 0)
        await turns()
        assert log == []
        assert runtime.ownership(TOPIC, 0) is Ownership.NOT_COORDINATOR

    asyncio.run(scenario())


def test_a_sole_broker_coordinates_a_topic_it_has_not_created_and_what_it_creates_from_birth():
    async def scenario():
        runtime, leadership, partitions, log, _ = make(sole_broker=True)
        runtime.start()
        assert runtime.ownership(TOPIC, 2) is Ownership.OWNED and runtime.owned(TOPIC) == [0, 1, 2]
        assert runtime.partition_count(TOPIC) == 3
        runtime.ensure_topic(TOPIC)
        for index in range(3):  # the new partitions are opened, led here: nothing to read
            leadership.lead(TOPIC, index)
        await turns()
        assert log == []
        assert all(runtime.ownership(TOPIC, i) is Ownership.OWNED for i in range(3))

    asyncio.run(scenario())


def test_a_cluster_broker_does_not_coordinate_a_topic_that_does_not_exist():
    runtime, *_ = make(sole_broker=False)
    assert runtime.ownership(TOPIC, 0) is Ownership.NOT_COORDINATOR


def test_the_timer_runs_the_shards_timed_work_at_its_deadline():
    async def scenario():
        runtime, _, _, _, shards = make()
        runtime.start()
        shard = runtime.shard(TOPIC)
        shard.deadline = 0  # long past: due now
        runtime.schedule(TOPIC)
        for _ in range(100):
            if shard.timed:
                break
            await asyncio.sleep(0.01)
        assert shard.timed == 1

    asyncio.run(scenario())


def test_timed_work_that_is_awaitable_runs_to_its_end_before_the_timer_is_armed_again():
    async def scenario():
        runtime, _, _, _, _ = make()
        runtime.start()
        shard = runtime.shard(TOPIC)
        release = asyncio.Event()
        runs = []

        async def work():
            runs.append("start")
            await release.wait()
            runs.append("end")

        def on_deadline(now):
            shard.deadline = 0  # due again at once
            return work()

        shard.on_deadline = on_deadline
        shard.deadline = 0
        runtime.schedule(TOPIC)
        for _ in range(100):
            if runs:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        assert runs == ["start"]  # not started a second time while the first runs
        release.set()
        for _ in range(100):
            if runs.count("start") == 2:
                break
            await asyncio.sleep(0.01)
        assert runs[:3] == ["start", "end", "start"]
        await runtime.stop()

    asyncio.run(scenario())


@pytest.mark.parametrize("sole_broker", [True, False])
def test_stop_stops_every_built_shard_later_registrations_first(sole_broker):
    async def scenario():
        runtime, _, _, log, _ = make(sole_broker)
        runtime.start()
        runtime.shard(TOPIC)
        runtime.shard(OTHER)
        await runtime.stop()
        assert log[-2:] == [("stop", OTHER), ("stop", TOPIC)]

    asyncio.run(scenario())
