"""The message browser's core: which records of a Fetch response belong to aborted or open transactions."""

from __future__ import annotations

from eoslog.console.records_view import ABORTED, COMMITTED, MARKER, OPEN, mark_records
from eoslog.records.batch import decode_batches
from eoslog.records.builder import build_simple
from eoslog.records.control import ControlType, build_control_batch


def log(*batches: bytes):
    return decode_batches(b"".join(batches))


def txn(base_offset: int, producer_id: int, *values: bytes) -> bytes:
    return build_simple(values, base_offset=base_offset, producer_id=producer_id, producer_epoch=0,
                        base_sequence=0, is_transactional=True)


def marker(offset: int, producer_id: int, kind: ControlType) -> bytes:
    return build_control_batch(kind, producer_id=producer_id, producer_epoch=0, base_offset=offset,
                               coordinator_epoch=0)


# offsets: 0-1 committed txn of 7, 2 COMMIT; 3-4 aborted txn of 7, 5 ABORT; 6 plain; 7 open txn of 9
BATCHES = (txn(0, 7, b"c0", b"c1"), marker(2, 7, ControlType.COMMIT), txn(3, 7, b"a0", b"a1"),
           marker(5, 7, ControlType.ABORT), build_simple([b"p0"], base_offset=6), txn(7, 9, b"o0"))


def test_read_uncommitted_marks_aborted_and_open_records() -> None:
    page = mark_records(log(*BATCHES), [(7, 3)], last_stable_offset=7, from_offset=0, limit=100,
                        hide_aborted=False)
    assert [(r.offset, r.status) for r in page.rows] == [
        (0, COMMITTED), (1, COMMITTED), (2, MARKER), (3, ABORTED), (4, ABORTED), (5, MARKER), (6, COMMITTED),
        (7, OPEN)]
    assert [r.marker for r in page.rows if r.status == MARKER] == ["COMMIT", "ABORT"]
    assert page.next_offset == 8


def test_read_committed_leaves_out_aborted_records_and_markers() -> None:
    page = mark_records(log(*BATCHES[:5]), [(7, 3)], last_stable_offset=7, from_offset=0, limit=100,
                        hide_aborted=True)
    assert [r.value for r in page.rows] == [b"c0", b"c1", b"p0"]


def test_a_page_starts_inside_a_batch_and_stops_at_the_limit() -> None:
    page = mark_records(log(*BATCHES), [(7, 3)], last_stable_offset=7, from_offset=1, limit=3, hide_aborted=False)
    assert [r.offset for r in page.rows] == [1, 2, 3]
    assert page.next_offset == 4
    # the aborted transaction is still recognised when the page starts after its first offset
    later = mark_records(log(*BATCHES), [(7, 3)], last_stable_offset=7, from_offset=4, limit=1, hide_aborted=False)
    assert [(r.offset, r.status) for r in later.rows] == [(4, ABORTED)]


def test_an_aborted_producer_is_clean_again_after_its_abort_marker() -> None:
    batches = log(txn(0, 7, b"a"), marker(1, 7, ControlType.ABORT), txn(2, 7, b"b"), marker(3, 7, ControlType.COMMIT))
    page = mark_records(batches, [(7, 0)], last_stable_offset=4, from_offset=0, limit=10, hide_aborted=False)
    assert [(r.offset, r.status) for r in page.rows] == [(0, ABORTED), (1, MARKER), (2, COMMITTED), (3, MARKER)]
