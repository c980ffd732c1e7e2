"""Combining state batches (Kafka's PersisterStateBatchCombiner): the cases of Kafka's tests, and the property
that combining equals painting the ranges on a per-offset map that keeps the greater (count, state)."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from eoslog.coordinator.share.batches import combine_state_batches
from eoslog.coordinator.share.log_format import StateBatch as B

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4


def test_nothing_combines_to_nothing():
    assert combine_state_batches((), (), 0) == ()


def test_adjacent_ranges_in_the_same_state_become_one():
    assert combine_state_batches([B(0, 10, AVAILABLE, 1)], [B(11, 20, AVAILABLE, 1)], 0) == (B(0, 20, AVAILABLE, 1),)


def test_adjacent_ranges_in_different_states_stay_apart_and_sorted():
    assert combine_state_batches([B(110, 119, AVAILABLE, 1)], [B(100, 109, ACKNOWLEDGED, 1)]) == (
        B(100, 109, ACKNOWLEDGED, 1), B(110, 119, AVAILABLE, 1))


def test_the_higher_delivery_count_wins_an_overlap_whatever_came_later():
    stored = [B(100, 109, AVAILABLE, 1)]
    written = [B(103, 105, AVAILABLE, 2)]
    expected = (B(100, 102, AVAILABLE, 1), B(103, 105, AVAILABLE, 2), B(106, 109, AVAILABLE, 1))
    assert combine_state_batches(stored, written) == expected
    assert combine_state_batches(written, stored) == expected
    # a lower count written later does not take the offsets back
    assert combine_state_batches([B(0, 9, AVAILABLE, 2)], [B(0, 9, ACKNOWLEDGED, 1)]) == (B(0, 9, AVAILABLE, 2),)


def test_at_an_equal_count_the_further_state_wins():
    assert combine_state_batches([B(100, 109, ACKNOWLEDGED, 1)], [B(100, 109, AVAILABLE, 1)]) == (
        B(100, 109, ACKNOWLEDGED, 1),)
    assert combine_state_batches([B(0, 9, AVAILABLE, 1)], [B(5, 9, ACKNOWLEDGED, 1)], 0) == (
        B(0, 4, AVAILABLE, 1), B(5, 9, ACKNOWLEDGED, 1))


def test_the_start_offset_drops_and_cuts():
    stored = [B(90, 99, AVAILABLE, 1), B(100, 109, AVAILABLE, 1)]
    assert combine_state_batches(stored, [B(95, 104, ACKNOWLEDGED, 1)], 103) == (
        B(103, 104, ACKNOWLEDGED, 1), B(105, 109, AVAILABLE, 1))
    assert combine_state_batches([B(0, 9, AVAILABLE, 1)], (), 10) == ()
    assert combine_state_batches([B(0, 9, AVAILABLE, 1)], (), 5) == (B(5, 9, AVAILABLE, 1),)


def test_kafkas_non_sequential_updates_keep_the_untouched_batch():
    """Kafka's testNonSequentialBatchUpdates: b1 acknowledged, the start offset moved to 110, b3 acknowledged:
    b2 (110-119, acquired twice) is not lost."""
    stored = combine_state_batches(
        [B(100, 109, ACQUIRED, 1), B(110, 119, ACQUIRED, 2), B(120, 129, ACQUIRED, 0)], [B(100, 109, ACKNOWLEDGED, 1)])
    assert combine_state_batches(stored, [B(120, 129, ACKNOWLEDGED, 1)], 110) == (
        B(110, 119, ACQUIRED, 2), B(120, 129, ACKNOWLEDGED, 1))


def test_a_range_ending_before_it_starts_covers_nothing():
    assert combine_state_batches([B(5, 4, AVAILABLE, 1), B(0, 1, AVAILABLE, 1)], ()) == (B(0, 1, AVAILABLE, 1),)


# ---- the property -----------------------------------------------------------------------------------------

def painted(batches, start_offset) -> dict[int, tuple[int, int]]:
    """Offset -> (delivery count, delivery state): every range painted in order, the greater kept."""
    cells: dict[int, tuple[int, int]] = {}
    for b in batches:
        for offset in range(b.first_offset, b.last_offset + 1):
            if start_offset == -1 or offset >= start_offset:
                cells[offset] = max(cells.get(offset, (b.delivery_count, b.delivery_state)),
                                    (b.delivery_count, b.delivery_state))
    return cells


def expanded(batches) -> dict[int, tuple[int, int]]:
    return {offset: (b.delivery_count, b.delivery_state)
            for b in batches for offset in range(b.first_offset, b.last_offset + 1)}


ranges = st.builds(lambda first, length, state, count: B(first, first + length, state, count),
                   st.integers(0, 60), st.integers(0, 12), st.sampled_from([AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED]),
                   st.integers(0, 3))


@given(st.lists(ranges, max_size=8), st.lists(ranges, max_size=8), st.sampled_from([-1, 0, 10, 30, 80]))
def test_combining_equals_painting_a_per_offset_map(so_far, new, start_offset):
    combined = combine_state_batches(so_far, new, start_offset)
    assert expanded(combined) == painted([*so_far, *new], start_offset)
    # the shortest cover: sorted, no overlap, and neighbours that touch differ
    for before, after in itertools.pairwise(combined):
        assert before.last_offset < after.first_offset
        if before.last_offset + 1 == after.first_offset:
            assert (before.delivery_count, before.delivery_state) != (after.delivery_count, after.delivery_state)


@given(st.lists(ranges, max_size=10), st.integers(0, 10))
def test_combining_in_steps_equals_combining_at_once(batches, cut):
    """Updates applied one after another give what one snapshot of all of them gives."""
    step = combine_state_batches(combine_state_batches((), batches[:cut]), batches[cut:])
    assert step == combine_state_batches((), batches)
