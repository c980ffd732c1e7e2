"""The controller's decisions, without I/O: replica assignment and leader election.

Kafka's rules (ZooKeeper mode), as pure functions of what ZooKeeper says now:
- A new partition gets the live replicas of its assignment as ISR, the first live one as leader.
- A partition whose leader is gone elects the first replica, in assignment order, that is both live and
  in the ISR (a clean election). Only with ``unclean.leader.election.enable`` may a live replica outside
  the ISR lead, and then the ISR is that replica alone. With neither, the partition stays offline
  (leader -1) and keeps its ISR, so the last in-sync replica can lead again when it returns.
- Followers that are not live leave the ISR at once (the leader would drop them after
  ``replica.lag.time.max.ms`` anyway; the controller knows sooner).
- Preferred-leader election moves leadership to the first replica of the assignment when it is live and
  in the ISR.
Every change of leader or ISR made here bumps the leader epoch; ISR changes the leader makes itself keep
the epoch (cluster/isr.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from eoslog.cluster.zk.layout import NO_LEADER, PartitionState


class ReplicaAssignmentError(ValueError):
    """Not enough brokers for the requested replication factor, or a bad manual assignment."""


def assign_replicas(broker_racks: Mapping[int, str | None], partitions: int, replication_factor: int,
                    *, first_partition: int = 0, start: int = 0) -> dict[int, tuple[int, ...]]:
    """Kafka's round-robin assignment: partition p's first replica is broker (start + p) mod n, the rest
    follow with a shift so replicas spread; with racks, brokers are interleaved rack by rack first so a
    partition's replicas land on as many racks as there are."""
    brokers = sorted(broker_racks)
    if replication_factor < 1:
        raise ReplicaAssignmentError(f"replication factor must be at least 1, got {replication_factor}")
    if replication_factor > len(brokers):
        raise ReplicaAssignmentError(
            f"replication factor {replication_factor} is larger than the {len(brokers)} live brokers")
    racked = any(broker_racks[b] for b in brokers)
    if racked:
        brokers = _rack_alternated(broker_racks)
    n = len(brokers)
    rack_count = len({broker_racks[b] for b in brokers})
    assignment: dict[int, tuple[int, ...]] = {}
    for offset in range(partitions):
        p = first_partition + offset
        first = (start + p) % n
        shift = 1 + (p // n) % max(n - 1, 1)
        replicas = [brokers[first]]
        for r in range(1, replication_factor):
            replicas.append(brokers[(first + shift + r - 1) % n] if n > 1 else brokers[first])
        if len(set(replicas)) != len(replicas):  # a shift that wrapped onto the first: take the next free
            replicas = [brokers[(first + r) % n] for r in range(replication_factor)]
        if racked:
            # Kafka's rule: each further replica goes to a rack the partition does not use yet, while
            # there is one; walking from the shifted position keeps the spread of plain round robin.
            replicas = [brokers[first]]
            position = first + shift
            while len(replicas) < replication_factor:
                used = {broker_racks[r] for r in replicas}
                for step in range(n):
                    candidate = brokers[(position + step) % n]
                    if candidate in replicas:
                        continue
                    if len(used) < rack_count and broker_racks[candidate] in used:
                        continue
                    replicas.append(candidate)
                    position += step + 1
                    break
        assignment[p] = tuple(replicas)
    return assignment


def _rack_alternated(broker_racks: Mapping[int, str | None]) -> list[int]:
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(broker_racks):
        by_rack.setdefault(broker_racks[broker] or "", []).append(broker)
    racks = [by_rack[r] for r in sorted(by_rack)]
    ordered: list[int] = []
    for i in range(max(len(r) for r in racks)):
        ordered.extend(r[i] for r in racks if i < len(r))
    return ordered


def check_manual_assignment(replicas: Iterable[int], known_brokers: Iterable[int]) -> tuple[int, ...]:
    replicas = tuple(replicas)
    if not replicas:
        raise ReplicaAssignmentError("a partition needs at least one replica")
    if len(set(replicas)) != len(replicas):
        raise ReplicaAssignmentError(f"duplicate broker in replica list {list(replicas)}")
    unknown = set(replicas) - set(known_brokers)
    if unknown:
        raise ReplicaAssignmentError(f"unknown brokers {sorted(unknown)} in replica list {list(replicas)}")
    return replicas


def check_manual_assignments(manual: Mapping[int, Iterable[int]], known_brokers: Iterable[int],
                             first_partition: int = 0, replication_factor: int | None = None
                             ) -> dict[int, tuple[int, ...]]:
    """CreateTopics' and CreatePartitions' manual assignments checked as Kafka's controller checks them
    (validateManualPartitionAssignment), with its words: each list not empty, every broker registered and
    named once (checked in ascending id order, so the least offender is named), every list as long as the
    ones before it (or as the topic's, when it grows), and the partitions consecutive from the first new
    one."""
    known = set(known_brokers)
    checked: dict[int, tuple[int, ...]] = {}
    for partition, replicas in manual.items():
        replicas = tuple(replicas)
        if not replicas:
            raise ReplicaAssignmentError("The manual partition assignment includes an empty replica list.")
        previous = None
        for broker in sorted(replicas):
            if broker not in known:
                raise ReplicaAssignmentError(f"The manual partition assignment includes broker {broker}, but "
                                             "no such broker is registered.")
            if broker == previous:
                raise ReplicaAssignmentError(f"The manual partition assignment includes the broker {broker} "
                                             "more than once.")
            previous = broker
        if replication_factor is not None and len(replicas) != replication_factor:
            raise ReplicaAssignmentError(
                f"The manual partition assignment includes a partition with {len(replicas)} replica(s), but "
                f"this is not consistent with previous partitions, which have {replication_factor} replica(s).")
        replication_factor = len(replicas)
        checked[partition] = replicas
    if sorted(checked) != list(range(first_partition, first_partition + len(checked))):
        raise ReplicaAssignmentError("partitions should be a consecutive 0-based integer sequence")
    return checked


@dataclass(frozen=True)
class Decision:
    """What the controller writes for one partition (``None`` state: create nothing yet)."""

    leader: int
    isr: tuple[int, ...]
    reason: str
    clean: bool = True


def initial_state(replicas: tuple[int, ...], live: set[int]) -> Decision | None:
    """For a partition with no state znode yet: None while none of its replicas is live."""
    live_replicas = tuple(r for r in replicas if r in live)
    if not live_replicas:
        return None
    return Decision(live_replicas[0], live_replicas, "new partition")


def next_state(replicas: tuple[int, ...], state: PartitionState, live: set[int], *, unclean: bool,
               preferred: bool = False, restarted: frozenset[int] = frozenset()) -> Decision | None:
    """The change the controller makes to an existing partition, or None when it is fine as it is.

    ``restarted``: live brokers that registered again since ``state`` was written (a restart the controller
    did not see as an absence: the new registration came before it read the old one's removal, or it was
    elected after both). What the state says of them dates from their previous life, and the log they
    started with may be shorter than what they held then (unsynced writes lost with the power), so for a
    partition with a leader they count as offline: a restarted leader is replaced from the rest of the ISR
    (or the partition goes offline, never unclean, and the next pass elects it again cleanly, in a new
    epoch), restarted followers leave the ISR and rejoin once caught up."""
    if state.leader != NO_LEADER and restarted & {state.leader, *state.isr}:
        decision = next_state(replicas, state, live - restarted, unclean=False, preferred=preferred)
        return None if decision is None else replace(decision, reason=(
            f"{decision.reason}; broker(s) {sorted(restarted)} registered again since the state was written"))
    live_isr = tuple(r for r in state.isr if r in live)
    if state.leader == NO_LEADER or state.leader not in live:
        for replica in replicas:
            if replica in live_isr:
                return Decision(replica, live_isr, "leader offline: clean election from the ISR")
        # Replicas no longer in the assignment can still be in the ISR (never with eoslog today).
        if live_isr:
            return Decision(live_isr[0], live_isr, "leader offline: clean election from the ISR")
        if unclean:
            for replica in replicas:
                if replica in live:
                    return Decision(replica, (replica,), "leader offline, no live ISR: UNCLEAN election", False)
        if state.leader == NO_LEADER:
            return None  # already offline; waits for an ISR member to return
        # Offline: keep the ISR as it was, so its members can lead cleanly when they come back.
        return Decision(NO_LEADER, state.isr, "leader offline and no live ISR member: partition offline")
    if live_isr != state.isr:
        return Decision(state.leader, live_isr, "followers offline: removed from the ISR")
    if preferred and replicas and replicas[0] != state.leader and replicas[0] in live_isr:
        return Decision(replicas[0], state.isr, "preferred leader election")
    return None


def elect_preferred(replicas: tuple[int, ...], state: PartitionState, live: set[int]) -> Decision | None:
    """ElectLeaders(PREFERRED): None when the preferred replica leads already or cannot lead cleanly."""
    if replicas and replicas[0] != state.leader and replicas[0] in live and replicas[0] in state.isr:
        return Decision(replicas[0], state.isr, "preferred leader election")
    return None


def elect_unclean(replicas: tuple[int, ...], state: PartitionState, live: set[int]) -> Decision | None:
    """ElectLeaders(UNCLEAN): only for a partition without a live leader; clean when the ISR allows."""
    if state.leader != NO_LEADER and state.leader in live:
        return None
    decision = next_state(replicas, state, live, unclean=True)
    return decision if decision is not None and decision.leader != NO_LEADER else None


def imbalanced(assignments: Mapping[tuple[str, int], tuple[int, ...]],
               states: Mapping[tuple[str, int], PartitionState], broker: int) -> float:
    """Kafka's leader-imbalance ratio for ``broker``: of the partitions it is preferred for, the share
    it does not lead."""
    preferred = [tp for tp, replicas in assignments.items() if replicas and replicas[0] == broker]
    if not preferred:
        return 0.0
    not_leading = sum(1 for tp in preferred if tp in states and states[tp].leader != broker)
    return not_leading / len(preferred)
