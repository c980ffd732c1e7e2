"""The leader's bookkeeping of its followers, without I/O: high watermark and ISR changes.

Contract (Kafka's ZooKeeper-mode rules)
- ``high_watermark(local_end)`` is the minimum log end offset over the *maximal* ISR: the committed ISR
  plus a member being added. A member being removed keeps counting until ZooKeeper has the new ISR,
  so the high watermark never passes data a replica that could still be elected lacks.
- A follower is caught up when it fetches from the leader's log end offset; it has been caught up
  "as of" the time of a fetch that reached what the leader's end was at its previous fetch.
- A follower leaves the ISR when it has not been caught up for ``replica.lag.time.max.ms``; it may
  join when its log end offset reaches the high watermark and the start of the current leader epoch
  (so it has truncated whatever a previous leader left behind).
- A follower's broker epoch (its registration's czxid, sent in every Fetch: KIP-903's ReplicaEpoch) is
  remembered as of its last fetch. A fetch under another epoch means the follower restarted: whatever it
  had when it was caught up may be gone (a power loss takes unsynced writes), so it starts over as a
  follower that never fetched, leaves the ISR at once (``restarted_members``), and may join again only
  by catching up under the new epoch.
- Changes are proposed here, written to ZooKeeper by the replica manager, and only then committed here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

UNKNOWN_OFFSET = -1
# A follower's broker epoch: not known (a fetch without one, Fetch before v15, or no fetch yet and no
# registration to go by); or restarted since the state this leadership started from, so its first fetch
# counts as a restart whatever epoch it names.
UNKNOWN_BROKER_EPOCH = -1
RESTARTED_BROKER_EPOCH = -2


@dataclass
class FollowerState:
    log_end_offset: int = UNKNOWN_OFFSET
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    leader_end_at_last_fetch: int = UNKNOWN_OFFSET
    broker_epoch: int = UNKNOWN_BROKER_EPOCH
    # Fetched under a new broker epoch while in the ISR: it must leave, and join again once caught up.
    restarted: bool = False


@dataclass
class LeaderIsr:
    leader: int
    leader_epoch: int
    epoch_start_offset: int
    isr: tuple[int, ...]
    followers: dict[int, FollowerState] = field(default_factory=dict)
    pending: tuple[int, ...] | None = None  # the ISR being written to ZooKeeper

    @classmethod
    def become_leader(cls, leader: int, leader_epoch: int, epoch_start_offset: int, replicas: tuple[int, ...],
                      isr: tuple[int, ...], now_ms: int, broker_epochs: dict[int, int] | None = None) -> LeaderIsr:
        """``broker_epochs``: each ISR member's epoch as far as the state goes (its registration's, when it
        registered before the state was written; RESTARTED_BROKER_EPOCH when after, and not cleanly)."""
        # Followers in the ISR get the benefit of the doubt for one lag period, as in Kafka.
        epochs = broker_epochs or {}
        followers = {r: FollowerState(last_caught_up_ms=now_ms if r in isr else 0,
                                      broker_epoch=epochs.get(r, UNKNOWN_BROKER_EPOCH))
                     for r in replicas if r != leader}
        return cls(leader, leader_epoch, epoch_start_offset, tuple(isr), followers)

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        if self.pending is None:
            return self.isr
        return tuple(dict.fromkeys((*self.isr, *self.pending)))

    def record_fetch(self, replica: int, fetch_offset: int, leader_end: int, now_ms: int,
                     broker_epoch: int = UNKNOWN_BROKER_EPOCH) -> bool:
        """Where the follower is; True when it fetched under a new broker epoch (it restarted), in which
        case nothing it reported before counts any more."""
        state = self.followers.setdefault(replica, FollowerState())
        restarted = False
        if broker_epoch != UNKNOWN_BROKER_EPOCH and broker_epoch != state.broker_epoch \
                and not self.is_stale(replica, broker_epoch):
            restarted = state.broker_epoch != UNKNOWN_BROKER_EPOCH
            if restarted:
                state = self.followers[replica] = FollowerState(restarted=replica in self.isr)
            state.broker_epoch = broker_epoch
        if fetch_offset >= leader_end:
            state.last_caught_up_ms = now_ms
        elif state.leader_end_at_last_fetch != UNKNOWN_OFFSET and fetch_offset >= state.leader_end_at_last_fetch:
            state.last_caught_up_ms = max(state.last_caught_up_ms, state.last_fetch_ms)
        state.log_end_offset = fetch_offset
        state.last_fetch_ms = now_ms
        state.leader_end_at_last_fetch = leader_end
        return restarted

    def is_stale(self, replica: int, broker_epoch: int) -> bool:
        """A fetch from an earlier life of the follower than the one it last fetched in (czxids only
        grow): one left in a dead connection's buffers, answered late. It must not count."""
        state = self.followers.get(replica)
        return (broker_epoch != UNKNOWN_BROKER_EPOCH and state is not None
                and 0 <= state.broker_epoch and broker_epoch < state.broker_epoch)

    def restarted_members(self, registered_epochs: dict[int, int]) -> tuple[int, ...]:
        """ISR members whose current registration (``registered_epochs``, the czxids of the leader's view)
        is not the one they last fetched under: restarted, whether or not they have fetched since."""
        return tuple(r for r in self.isr if r != self.leader
                     and (state := self.followers.get(r)) is not None
                     and (state.restarted or (
                         state.broker_epoch != UNKNOWN_BROKER_EPOCH
                         and registered_epochs.get(r, UNKNOWN_BROKER_EPOCH) not in (UNKNOWN_BROKER_EPOCH,
                                                                                     state.broker_epoch))))

    def high_watermark(self, local_end: int) -> int:
        low = local_end
        for replica in self.maximal_isr:
            if replica == self.leader:
                continue
            state = self.followers.get(replica)
            end = state.log_end_offset if state is not None else UNKNOWN_OFFSET
            low = min(low, end)
        return low

    def out_of_sync(self, now_ms: int, lag_max_ms: int) -> tuple[int, ...]:
        return tuple(r for r in self.isr if r != self.leader
                     and now_ms - self.followers.get(r, FollowerState()).last_caught_up_ms > lag_max_ms)

    def may_join(self, replica: int, high_watermark: int, registered_epoch: int = UNKNOWN_BROKER_EPOCH) -> bool:
        """Caught up, under the broker epoch of its current registration when both are known (KIP-903:
        fetches of an earlier life of the broker never earn a place in the ISR)."""
        state = self.followers.get(replica)
        return (replica not in self.isr and state is not None
                and (registered_epoch == UNKNOWN_BROKER_EPOCH or state.broker_epoch == UNKNOWN_BROKER_EPOCH
                     or state.broker_epoch == registered_epoch)
                and state.log_end_offset >= max(high_watermark, self.epoch_start_offset))

    def set_replicas(self, replicas: tuple[int, ...], now_ms: int) -> None:
        """The assignment changed under the same epoch (a reassignment adding or dropping replicas)."""
        for replica in replicas:
            if replica != self.leader and replica not in self.followers:
                self.followers[replica] = FollowerState(last_caught_up_ms=0)
        for replica in list(self.followers):
            if replica not in replicas and replica not in self.isr:
                del self.followers[replica]

    def propose(self, isr: tuple[int, ...]) -> None:
        self.pending = isr

    def commit(self, isr: tuple[int, ...]) -> None:
        self.isr = tuple(isr)
        self.pending = None
        for replica, state in self.followers.items():
            if replica not in self.isr:
                # Out: from here it joins like any follower, by catching up (under its current epoch).
                state.restarted = False
                if state.broker_epoch == RESTARTED_BROKER_EPOCH:
                    state.broker_epoch = UNKNOWN_BROKER_EPOCH
