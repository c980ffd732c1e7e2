"""Compaction and transactions on hand-built batches and markers: aborted data never resurfaces,
read_committed sees the same latest values before and after, markers go only when Kafka's rules allow."""

from __future__ import annotations

import random

from cleaner_helpers import Clock, clean_once, marker, open_log, read_all, target_for

from eoslog.records import SimpleRecord, build_batch
from eoslog.records.control import ControlType, parse_control_batch
from eoslog.records.header import DELETE_HORIZON_BIT


def _txn(log, producer_id, items, epoch=0):
    records_ = [SimpleRecord(k.encode(), None if v is None else v.encode(), timestamp=log._clock()) for k, v in items]
    return log.append(build_batch(records_, producer_id=producer_id, producer_epoch=epoch, base_sequence=0,
                                  is_transactional=True)).first_offset


def read_committed(log) -> dict[bytes, bytes | None]:
    """What a read_committed consumer ends up with: the latest committed value per key (a model consumer:
    a producer's transactional records wait for its marker; COMMIT delivers them, ABORT drops them)."""
    latest: dict[bytes, bytes | None] = {}
    waiting: dict[int, list] = {}
    for batch in read_all(log):
        header = batch.header
        if header.is_control:
            held = waiting.pop(header.producer_id, [])
            if parse_control_batch(batch).is_commit:
                for r in held:
                    latest[r.key] = r.value
            continue
        if header.is_transactional:
            waiting.setdefault(header.producer_id, []).extend(batch.records)
        else:
            for r in batch.records:
                latest[r.key] = r.value
    assert not waiting, "a transaction without its marker"
    return {k: v for k, v in latest.items() if v is not None}


def _all_values(log) -> set[bytes]:
    return {r.value for b in read_all(log) if not b.header.is_control for r in b.records if r.value}


def _markers(log):
    return [(b.header.producer_id, b.header.base_offset, parse_control_batch(b).control_type, b.header)
            for b in read_all(log) if b.header.is_control]


def _history(log, rounds=120, seed=11):
    rnd = random.Random(seed)
    for i in range(rounds):
        producer = 1000 + rnd.randrange(3)
        outcome = rnd.choice([ControlType.COMMIT, ControlType.ABORT, None])
        if outcome is None:
            log.append(build_batch([SimpleRecord(f"k{rnd.randrange(12)}".encode(), f"plain{i}".encode())]))
            continue
        tag = "ABORTED" if outcome is ControlType.ABORT else "committed"
        for _ in range(rnd.randrange(1, 3)):
            _txn(log, producer, [(f"k{rnd.randrange(12)}", f"{tag}{i}")])
        marker(log, outcome, producer)
    log.roll()


def test_aborted_records_never_resurface_and_read_committed_is_unchanged(tmp_path):
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock)
    _history(log)
    before = read_committed(log)
    clean_once(tmp_path, log, clock)
    assert not [v for v in _all_values(log) if v.startswith(b"ABORTED")]
    assert read_committed(log) == before
    clock.now += 2 * 24 * 3600 * 1000  # past every delete horizon
    clean_once(tmp_path, log, clock)
    clean_once(tmp_path, log, clock)
    assert read_committed(log) == before
    assert not [v for v in _all_values(log) if v.startswith(b"ABORTED")]


def test_aborted_data_does_not_shadow_the_committed_value(tmp_path):
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock)
    log.append(build_batch([SimpleRecord(b"k", b"committed")]))
    _txn(log, 7, [("k", "ABORTED")])
    marker(log, ControlType.ABORT, 7)
    log.roll()
    clean_once(tmp_path, log, clock, target=target_for(log, active_producers=lambda: frozenset()))
    assert read_committed(log) == {b"k": b"committed"}
    assert _all_values(log) == {b"committed"}


def test_markers_stay_while_their_transaction_has_data_and_go_after_the_horizon(tmp_path):
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock, delete_retention_ms=1_000)
    _txn(log, 1, [("a", "1")])
    commit_a = marker(log, ControlType.COMMIT, 1)
    _txn(log, 2, [("b", "1")])
    commit_b = marker(log, ControlType.COMMIT, 2)
    _txn(log, 3, [("x", "ABORTED")])
    abort_c = marker(log, ControlType.ABORT, 3)
    log.append(build_batch([SimpleRecord(b"a", b"2")]))  # supersedes txn 1's only record
    log.roll()
    none_active = target_for(log, active_producers=lambda: frozenset(),
                             referenced_markers=lambda: frozenset({(3, abort_c)}))
    clean_once(tmp_path, log, clock, target=none_active)
    markers = {offset: header for _, offset, _, header in _markers(log)}
    assert set(markers) == {commit_a, commit_b, abort_c}
    assert not markers[commit_b].attributes & DELETE_HORIZON_BIT  # txn 2 still has data
    assert markers[commit_a].attributes & DELETE_HORIZON_BIT  # txn 1's data is gone: horizon set
    assert not markers[abort_c].attributes & DELETE_HORIZON_BIT  # an index entry still names it
    clock.now += 1_000
    unreferenced = target_for(log, active_producers=lambda: frozenset())
    clean_once(tmp_path, log, clock, target=unreferenced)
    assert {offset for _, offset, _, _ in _markers(log)} == {commit_b, abort_c}  # commit_a went
    clock.now += 1_000
    clean_once(tmp_path, log, clock, target=unreferenced)
    assert {offset for _, offset, _, _ in _markers(log)} == {commit_b}
    assert read_committed(log) == {b"a": b"2", b"b": b"1"}


def test_a_producers_last_batch_is_kept_empty_for_its_sequence_numbers(tmp_path):
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock)
    log.append(build_batch([SimpleRecord(b"k", b"1")], producer_id=5, producer_epoch=0, base_sequence=0))
    log.append(build_batch([SimpleRecord(b"k", b"2"), SimpleRecord(b"j", b"2")], producer_id=6,
                           producer_epoch=0, base_sequence=0))
    log.append(build_batch([SimpleRecord(b"k", b"3"), SimpleRecord(b"j", b"3")], producer_id=5,
                           producer_epoch=0, base_sequence=1))
    log.append(build_batch([SimpleRecord(b"k", b"4")], producer_id=6, producer_epoch=0, base_sequence=2))
    log.roll()
    clean_once(tmp_path, log, clock)
    batches = [(b.header.producer_id, b.header.base_sequence, b.header.last_offset_delta, len(b.records))
               for b in read_all(log)]
    # producer 6's first batch is gone; its last batch holds k=4; producer 5's last keeps j=3
    assert batches == [(5, 1, 1, 1), (6, 2, 0, 1)]
    log.append(build_batch([SimpleRecord(b"j", b"5")], producer_id=7, producer_epoch=0, base_sequence=0))
    log.roll()
    clean_once(tmp_path, log, clock)
    batches = [(b.header.producer_id, b.header.base_sequence, len(b.records)) for b in read_all(log)]
    assert batches == [(5, 1, 0), (6, 2, 1), (7, 0, 1)]  # 5's last batch stays, emptied
