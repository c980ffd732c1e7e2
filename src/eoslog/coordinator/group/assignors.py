"""Server-side partition assignors of consumer groups (KIP-848): ``uniform`` and ``range``.

An assignor maps (members with their subscribed topics, partition counts, the current target) to a new
target assignment. Pure functions, deterministic: the same input always yields the same output, so a
restarted coordinator that recomputes an assignment agrees with what it persisted.

* uniform -- balanced (member counts differ by at most one among members eligible for the same
  partitions) and sticky: a partition stays with its current owner while that owner is under its quota.
* range -- per topic, the subscribed members in member-id order each take a contiguous run; the first
  ``partitions % members`` take one more. Members with the same subscription get co-partitioned ranges.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

Assignment = dict[str, frozenset[int]]  # topic -> partitions
Subscriptions = Mapping[str, frozenset[str]]  # member id -> subscribed topics (resolved)
Assignor = Callable[[Subscriptions, Mapping[str, int], Mapping[str, Assignment]], dict[str, Assignment]]

UNIFORM = "uniform"
RANGE = "range"


def _freeze(raw: dict[str, dict[str, set[int]]], members) -> dict[str, Assignment]:
    return {m: {t: frozenset(ps) for t, ps in raw.get(m, {}).items() if ps} for m in members}


def uniform(subscriptions: Subscriptions, partition_counts: Mapping[str, int],
            current: Mapping[str, Assignment]) -> dict[str, Assignment]:
    members = sorted(subscriptions)
    if not members:
        return {}
    wanted = [(t, p) for t in sorted({t for s in subscriptions.values() for t in s})
              for p in range(partition_counts.get(t, 0))]
    eligible = {tp: [m for m in members if tp[0] in subscriptions[m]] for tp in wanted}
    quota = -(-len(wanted) // len(members))  # ceil: no member keeps more than a fair share
    counts = dict.fromkeys(members, 0)
    owner: dict[tuple[str, int], str] = {}
    for m in members:  # stickiness first, in member order so the result is deterministic
        for t in sorted(current.get(m, {})):
            for p in sorted(current[m][t]):
                tp = (t, p)
                if tp in eligible and tp not in owner and t in subscriptions[m] and counts[m] < quota:
                    owner[tp] = m
                    counts[m] += 1
    for tp in wanted:
        if tp not in owner and eligible[tp]:
            m = min(eligible[tp], key=lambda x: (counts[x], x))
            owner[tp] = m
            counts[m] += 1
    # Balance: move a partition from the fullest to the emptiest eligible member until within one.
    moved = True
    while moved:
        moved = False
        for tp in sorted(owner):
            m = owner[tp]
            target = min(eligible[tp], key=lambda x: (counts[x], x))
            if counts[m] - counts[target] > 1:
                owner[tp] = target
                counts[m] -= 1
                counts[target] += 1
                moved = True
    raw: dict[str, dict[str, set[int]]] = {}
    for (t, p), m in owner.items():
        raw.setdefault(m, {}).setdefault(t, set()).add(p)
    return _freeze(raw, members)


def range_(subscriptions: Subscriptions, partition_counts: Mapping[str, int],
           current: Mapping[str, Assignment]) -> dict[str, Assignment]:
    members = sorted(subscriptions)
    raw: dict[str, dict[str, set[int]]] = {}
    for t in sorted({t for s in subscriptions.values() for t in s}):
        subscribers = [m for m in members if t in subscriptions[m]]
        count = partition_counts.get(t, 0)
        if not subscribers or not count:
            continue
        share, extra = divmod(count, len(subscribers))
        start = 0
        for i, m in enumerate(subscribers):
            n = share + (1 if i < extra else 0)
            if n:
                raw.setdefault(m, {})[t] = set(range(start, start + n))
            start += n
    return _freeze(raw, members)


ASSIGNORS: dict[str, Assignor] = {UNIFORM: uniform, RANGE: range_}
