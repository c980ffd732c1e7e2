"""A harness around the sans-IO group coordinator: a fake clock, a fake ``__consumer_offsets`` log
that appends every write, and a mailbox of completed pending calls."""

from __future__ import annotations

import itertools

import pytest

from eoslog.coordinator.group import GroupConfig, GroupCoordinator, LogEntry, Marker, Result
from eoslog.coordinator.group.errors import Errors

SESSION = 10_000
REBALANCE = 30_000


class Harness:
    def __init__(self, **config: object) -> None:
        config.setdefault("initial_rebalance_delay_ms", 0)
        self.config = GroupConfig(**config)  # type: ignore[arg-type]
        self._ids = itertools.count(1)
        # What the coordinator runtime says of each partition (served here unless a test says otherwise).
        self.ownership: dict[int, Errors] = {}
        self.c = GroupCoordinator(self.config, member_id_factory=lambda cid: f"{cid}-{next(self._ids)}",
                                  ownership=lambda partition: self.ownership.get(partition, Errors.NONE))
        self.now = 0
        self.log: dict[int, list[LogEntry]] = {}
        self.answers: dict[int, object] = {}
        self.auto_write = True
        self.held: list = []  # writes not yet completed when auto_write is off
        self.fail_writes: Errors | None = None

    # -- plumbing ---------------------------------------------------------------------------------
    def run(self, result: Result) -> Result:
        for completion in result.completed:
            assert completion.token not in self.answers, "a pending call was answered twice"
            self.answers[completion.token] = completion.response
        for write in result.writes:
            if self.auto_write:
                self.finish_write(write)
            else:
                self.held.append(write)
        return result

    def finish_write(self, write, error: Errors | None = None) -> Result:
        error = error or self.fail_writes
        log_offset = -1
        if error is None:
            entries = self.log.setdefault(write.partition, [])
            log_offset = len(entries)
            for key, value in write.records:
                entries.append(LogEntry(len(entries), key, value, write.producer_id, write.is_transactional))
        return self.run(self.c.complete_write(write.write_id, now_ms=self.now, error=error,
                                              log_offset=log_offset))

    def release_writes(self, error: Errors | None = None) -> None:
        held, self.held = self.held, []
        for write in held:
            self.finish_write(write, error)

    def marker(self, producer_id: int, commit: bool) -> None:
        partitions = [p for p, entries in self.log.items()
                      if any(e.producer_id == producer_id and e.is_transactional for e in entries)]
        for p in partitions:
            entries = self.log[p]
            entries.append(LogEntry(len(entries), None, None, producer_id, True,
                                    Marker.COMMIT if commit else Marker.ABORT))
        self.run(self.c.complete_txn(producer_id, commit, partitions=partitions, now_ms=self.now))

    def advance(self, ms: int) -> Result:
        self.now += ms
        return self.run(self.c.tick(self.now))

    def answer(self, result: Result):
        """The response to a call: immediate, or already delivered as a completion."""
        if result.response is not None:
            return result.response
        assert result.pending is not None
        return self.answers.get(result.pending.token)

    # -- the classic protocol -----------------------------------------------------------------------
    def join(self, member_id: str = "", group: str = "g", *, client: str = "c", instance: str | None = None,
             protocols=(("range", b"m"),), session: int = SESSION, rebalance: int = REBALANCE,
             protocol_type: str = "consumer", require_known: bool = True, **kw) -> Result:
        return self.run(self.c.join_group(
            group, member_id, protocol_type=protocol_type, protocols=protocols, session_timeout_ms=session,
            rebalance_timeout_ms=rebalance, group_instance_id=instance, client_id=client,
            client_host="/127.0.0.1", require_known_member_id=require_known, now_ms=self.now, **kw))

    def new_member(self, group: str = "g", client: str = "c", **kw) -> tuple[str, Result]:
        """MEMBER_ID_REQUIRED round trip, then the real join. Returns (member id, join result)."""
        first = self.join("", group, client=client, **kw)
        assert first.response.error is Errors.MEMBER_ID_REQUIRED
        member_id = first.response.member_id
        return member_id, self.join(member_id, group, client=client, **kw)

    def sync(self, member_id: str, generation: int, assignments=None, group: str = "g",
             instance: str | None = None) -> Result:
        return self.run(self.c.sync_group(group, member_id, generation, assignments or {},
                                          group_instance_id=instance, now_ms=self.now))

    def heartbeat(self, member_id: str, generation: int, group: str = "g", instance: str | None = None):
        return self.run(self.c.heartbeat(group, member_id, generation, group_instance_id=instance,
                                         now_ms=self.now)).response

    def leave(self, *members, group: str = "g"):
        return self.run(self.c.leave_group(group, list(members), now_ms=self.now)).response

    def group(self, group: str = "g"):
        return self.c.groups[group]

    def stable_group(self, n: int, group: str = "g") -> list[str]:
        """A Stable group of n dynamic members; returns member ids (the first is the leader)."""
        ids = [self.join("", group, client=f"c{i}").response.member_id for i in range(n)]
        for i, member_id in enumerate(ids):
            self.join(member_id, group, client=f"c{i}")
        # Members whose join completed before the others arrived rejoin, as their heartbeat's
        # REBALANCE_IN_PROGRESS would make them.
        for i, member_id in enumerate(ids):
            g = self.group(group)
            if g.state.name == "PREPARING_REBALANCE" and g.members[member_id].awaiting_join is None:
                self.join(member_id, group, client=f"c{i}")
        gen = self.group(group).generation_id
        leader = self.group(group).leader_id
        for member_id in ids:
            if member_id != leader:
                self.sync(member_id, gen, group=group)
        self.sync(leader, gen, {m: f"a-{m}".encode() for m in ids}, group=group)
        assert self.group(group).state.name == "STABLE"
        return [leader] + [m for m in ids if m != leader]


@pytest.fixture
def h() -> Harness:
    return Harness()


@pytest.fixture
def make_harness():
    return Harness
