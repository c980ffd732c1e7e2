"""Source offsets: parsing, canonical form, and admission control. No I/O.

An offset, as Spark stores it in the checkpoint's ``offsets/N`` file, is ``{"topic": {"partition": next}}``
where ``next`` is the next offset to read (exclusive end of the batch before). This is the JSON layout of
Spark's Kafka source, so an ``offsets`` file reads the same.

Spark compares offsets as JSON *strings*: the same offset with another key order looks like new data and
starts an empty micro-batch. Every offset leaving this module is therefore built by :func:`canonical`,
topics and partitions in sorted-string order, i.e. exactly what ``json.dumps(..., sort_keys=True)`` gives.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

# Spark's Kafka source spells "earliest" and "latest" inside a JSON offset as -2 and -1.
EARLIEST = -2
LATEST = -1

# {(topic, partition): offset}: the shape every function here works on.
PartitionOffsets = dict[tuple[str, int], int]


class OffsetError(ValueError):
    """An offset option or checkpointed offset that cannot be used (the user's input, not the broker's)."""


def canonical(offsets: Mapping[tuple[str, int], int]) -> dict[str, dict[str, int]]:
    """The JSON-ready dict for ``offsets``, in sorted-key order at both levels."""
    nested: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in offsets.items():
        nested.setdefault(topic, {})[str(partition)] = int(offset)
    return {topic: dict(sorted(parts.items())) for topic, parts in sorted(nested.items())}


def flatten(offset: Mapping[str, Mapping[str, int]] | str | None) -> PartitionOffsets:
    """The reverse of :func:`canonical`; accepts the dict Spark hands back or its JSON text."""
    if offset is None:
        return {}
    if isinstance(offset, str):
        offset = json.loads(offset)
    if not isinstance(offset, Mapping):
        raise OffsetError(f"an offset must be a JSON object of topics, not {offset!r}")
    flat: PartitionOffsets = {}
    for topic, parts in offset.items():
        if not isinstance(parts, Mapping):
            raise OffsetError(f"offsets of topic {topic!r} must be an object of partitions, not {parts!r}")
        for partition, value in parts.items():
            try:
                flat[(str(topic), int(partition))] = int(value)
            except (TypeError, ValueError):
                raise OffsetError(f"bad offset {value!r} for {topic}-{partition}") from None
    return flat


def to_json(offsets: Mapping[tuple[str, int], int]) -> str:
    return json.dumps(canonical(offsets), separators=(",", ":"))


def parse_offset_option(text: str | None, name: str, default: str) -> str | PartitionOffsets:
    """``startingOffsets`` / ``endingOffsets``: "earliest", "latest" or a JSON object with -2/-1 allowed.

    Returns the keyword, or the per-partition dict (still holding -2/-1 where the user wrote them).
    """
    text = (text or default).strip()
    if text.lower() in ("earliest", "latest"):
        return text.lower()
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OffsetError(f"{name} must be 'earliest', 'latest' or a JSON object: {exc}") from None
    flat = flatten(value)
    for (topic, partition), offset in flat.items():
        if offset < EARLIEST:
            raise OffsetError(f"{name}: offset {offset} for {topic}-{partition} is neither >= 0, -1 nor -2")
    return flat


def resolve(spec: str | PartitionOffsets, partitions: Iterable[tuple[str, int]],
            earliest: Mapping[tuple[str, int], int], latest: Mapping[tuple[str, int], int],
            name: str) -> PartitionOffsets:
    """Concrete offsets for ``partitions`` from a parsed option and the broker's earliest/latest.

    A partition missing from a JSON option is an error, as in Spark's Kafka source: silently starting
    it somewhere would read or skip data the user did not ask about.
    """
    result: PartitionOffsets = {}
    for tp in partitions:
        if isinstance(spec, str):
            result[tp] = earliest[tp] if spec == "earliest" else latest[tp]
            continue
        if tp not in spec:
            raise OffsetError(f"{name} does not name partition {tp[0]}-{tp[1]}")
        wanted = spec[tp]
        result[tp] = earliest[tp] if wanted == EARLIEST else latest[tp] if wanted == LATEST else wanted
    return result


def admit(start: Mapping[tuple[str, int], int], latest: Mapping[tuple[str, int], int],
          max_rows: int | None) -> PartitionOffsets:
    """The end offsets of the next micro-batch: ``latest``, cut down to at most ``max_rows`` offsets.

    The allowance is spread over partitions in proportion to what each has waiting (Spark's Kafka
    source does the same), floor first, then the remainder one by one in sorted partition order, so the
    answer is a pure function of its inputs: a replanned batch gets the same ends. Offsets are counted,
    not records: with read_committed, control and aborted records use offsets too, so a batch may hold
    slightly fewer rows than ``max_rows``, never more. A partition in ``latest`` but not ``start`` is
    new; its backlog counts from 0.
    """
    ends = {tp: max(latest[tp], start.get(tp, 0)) for tp in latest}
    for tp, offset in start.items():
        ends.setdefault(tp, offset)  # a partition that vanished from metadata keeps its position
    if max_rows is None:
        return ends
    backlog = {tp: ends[tp] - start.get(tp, 0) for tp in sorted(ends)}
    total = sum(backlog.values())
    if total <= max_rows:
        return ends
    shares = {tp: (max_rows * waiting) // total for tp, waiting in backlog.items()}
    remainder = max_rows - sum(shares.values())
    for tp, waiting in backlog.items():
        if remainder == 0:
            break
        if shares[tp] < waiting:
            shares[tp] += 1
            remainder -= 1
    return {tp: start.get(tp, 0) + shares[tp] for tp in ends}


def cap(ends: Mapping[tuple[str, int], int], target: Mapping[tuple[str, int], int] | None) -> PartitionOffsets:
    """``ends`` limited to an availableNow target; partitions born after the target are not read."""
    if target is None:
        return dict(ends)
    return {tp: min(offset, target[tp]) if tp in target else offset for tp, offset in ends.items()
            if tp in target}


def ranges(start: Mapping[tuple[str, int], int], end: Mapping[tuple[str, int], int]
           ) -> list[tuple[str, int, int, int]]:
    """(topic, partition, from, until) for every partition with offsets to read, in sorted order."""
    out = []
    for tp in sorted(end):
        first = start.get(tp, 0)
        if end[tp] > first:
            out.append((tp[0], tp[1], first, end[tp]))
    return out
