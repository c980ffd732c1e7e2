"""The share groups' server-side assignor: Kafka 4.2's SimpleAssignor ("simple"), as a pure function.

Read from Kafka's group-coordinator ``assignor/SimpleAssignor.java``,
``SimpleHomogeneousAssignmentBuilder.java`` and ``SimpleHeterogeneousAssignmentBuilder.java``. The rules:

* **What is assigned.** Every partition of every existing topic a member subscribes to (and, from step 3,
  only the partitions whose share state is initialized: ``assignable``). A member gets partitions of the
  topics it subscribes to and nothing else; a partition or topic no longer in the metadata is dropped.
* **Sharing.** A share partition may be held by several members. With M members and P partitions, each
  partition is held by ``sharing = ceil(M / P)`` members (1 while members do not outnumber partitions), so
  ``sharing * P`` assignments are spread over the members.
* **Balance first.** Each member's quota is ``floor`` or ``ceil`` of ``sharing * P / M`` (the quotas add up
  to ``sharing * P``), so member sizes differ by at most one. Kafka tolerates a partition shared by fewer
  than ``sharing`` members when every member still short of its quota already holds it; it is never left
  with none.
* **Then stickiness.** The previous target is the starting point: a member keeps what it held unless it is
  over its quota, the partition is shared by more than ``sharing`` members, or the topic is no longer one
  it subscribes to. Only the remaining places are handed out.
* **Homogeneous or not.** When every member subscribes to the same topic names (Kafka's
  SubscriptionType.HOMOGENEOUS) all subscribed partitions are balanced together; otherwise each topic is
  balanced on its own among the members subscribing to it (Kafka's heterogeneous builder), so a member
  subscribed to two topics gets its share of each.

Kafka walks Java hash maps, so its choices among equals follow hash order. Here every choice is
deterministic, and made for fewer moves: the larger quotas go to the members already holding the most;
an over-quota member first gives up its most shared partitions; an over-shared partition is given up by
the holders with the least room left under their quota; a free place goes to the least loaded member short of its quota.
The balance bounds are Kafka's. One rule is stricter than Kafka's heterogeneous builder, which keeps a
member's previous partitions of a topic nobody subscribes to any more: here a member only ever holds
topics it subscribes to.
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple

ShareAssignment = dict[uuid.UUID, frozenset[int]]  # topic id -> partitions
TopicPartition = tuple[uuid.UUID, int]
Assignable = Callable[[uuid.UUID, int], bool]

NAME = "simple"  # the assignor name ShareGroupDescribe reports (group.share.assignors)


class TopicMetadata(NamedTuple):
    """What the assignor (and the group's metadata hash) needs of a topic."""

    topic_id: uuid.UUID
    partitions: int


def simple_assign(subscriptions: Mapping[str, Iterable[str]], topics: Mapping[str, TopicMetadata],
                  current: Mapping[str, Mapping[uuid.UUID, Iterable[int]]],
                  assignable: Assignable | None = None) -> dict[str, ShareAssignment]:
    """The new target assignment: member id -> topic id -> partitions, for every member in
    ``subscriptions`` (member id -> subscribed topic names). ``topics``: the broker's topics by name;
    ``current``: the previous target; ``assignable(topic_id, partition)``: whether a partition may be
    assigned yet (None: all)."""
    subs = {m: frozenset(names) for m, names in subscriptions.items()}
    if not subs:
        return {}

    def partitions_of(names: Iterable[str]) -> list[TopicPartition]:
        return [(topics[n].topic_id, p) for n in sorted(names) if n in topics
                for p in range(topics[n].partitions)
                if assignable is None or assignable(topics[n].topic_id, p)]

    held = {m: {(t, p) for t, ps in current.get(m, {}).items() for p in ps} for m in subs}
    if len(set(subs.values())) == 1:
        parts = [(sorted(subs), partitions_of(next(iter(subs.values()))))]
    else:
        parts = [(sorted(m for m in subs if name in subs[m]), partitions_of((name,)))
                 for name in sorted(set().union(*subs.values()))]
    chosen: dict[str, set[TopicPartition]] = {m: set() for m in subs}
    for members, targets in parts:
        for member, tps in _balance(members, targets, held).items():
            chosen[member] |= tps
    return {m: _by_topic(tps) for m, tps in chosen.items()}


def sharing(members: int, partitions: int) -> int:
    """How many members hold each partition: ``ceil(members / partitions)`` (0 without partitions)."""
    return -(-members // partitions) if partitions else 0


def _balance(members: list[str], targets: list[TopicPartition],
             held: Mapping[str, set[TopicPartition]]) -> dict[str, set[TopicPartition]]:
    """One balancing unit (all partitions of a homogeneous group, or one topic): ``targets`` spread over
    ``members``, starting from what they ``held``."""
    if not members or not targets:
        return {m: set() for m in members}
    target_set = set(targets)
    rank = {tp: i for i, tp in enumerate(targets)}
    mine = {m: held.get(m, set()) & target_set for m in members}  # drops what is no longer assignable
    share = sharing(len(members), len(targets))
    base, extra = divmod(share * len(targets), len(members))
    by_holdings = sorted(members, key=lambda m: (-len(mine[m]), m))
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(by_holdings)}
    holders: dict[TopicPartition, set[str]] = {tp: set() for tp in targets}
    for m in members:
        for tp in mine[m]:
            holders[tp].add(m)

    def drop(m: str, tp: TopicPartition) -> None:
        mine[m].discard(tp)
        holders[tp].discard(m)

    # Over its quota: give up the most shared partitions first (they may be over-shared anyway).
    for m in members:
        excess = len(mine[m]) - quota[m]
        if excess > 0:
            for tp in sorted(mine[m], key=lambda tp: (-len(holders[tp]), -rank[tp]))[:excess]:
                drop(m, tp)
    # Shared by too many: the holders closest to their quota give it up (one with room left would have to
    # find two new partitions instead of one).
    for tp in targets:
        excess = len(holders[tp]) - share
        if excess > 0:
            for m in sorted(holders[tp], key=lambda m: (quota[m] - len(mine[m]), -len(mine[m]), m))[:excess]:
                drop(m, tp)
    # Free places go to the least loaded members short of their quota, skipping those holding it already.
    short = [(len(mine[m]), m) for m in members if len(mine[m]) < quota[m]]
    heapq.heapify(short)
    for tp in targets:
        need = share - len(holders[tp])
        aside = []
        while need > 0 and short:
            count, m = heapq.heappop(short)
            if tp in mine[m]:
                aside.append((count, m))
                continue
            mine[m].add(tp)
            holders[tp].add(m)
            need -= 1
            if count + 1 < quota[m]:
                aside.append((count + 1, m))
        for item in aside:
            heapq.heappush(short, item)
    return mine


def _by_topic(tps: Iterable[TopicPartition]) -> ShareAssignment:
    out: dict[uuid.UUID, set[int]] = {}
    for t, p in tps:
        out.setdefault(t, set()).add(p)
    return {t: frozenset(ps) for t, ps in out.items()}
