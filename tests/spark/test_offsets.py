"""The source's offset arithmetic (pure): canonical JSON, option parsing, admission control."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eoslog.spark import offsets
from eoslog.spark.offsets import OffsetError

tps = st.tuples(st.sampled_from(["a", "b", "payments", "t10"]), st.integers(0, 15))
offset_maps = st.dictionaries(tps, st.integers(0, 10**9), max_size=12)


@given(offset_maps)
def test_canonical_is_sorted_json_and_round_trips(flat):
    nested = offsets.canonical(flat)
    assert json.dumps(nested) == json.dumps(nested, sort_keys=True)
    assert offsets.flatten(nested) == flat
    assert offsets.flatten(json.dumps(nested)) == flat


@given(offset_maps)
def test_canonical_does_not_depend_on_insertion_order(flat):
    reversed_map = dict(reversed(list(flat.items())))
    assert json.dumps(offsets.canonical(flat)) == json.dumps(offsets.canonical(reversed_map))


def test_option_keywords_and_json():
    assert offsets.parse_offset_option(None, "startingOffsets", "latest") == "latest"
    assert offsets.parse_offset_option(" Earliest ", "startingOffsets", "latest") == "earliest"
    parsed = offsets.parse_offset_option('{"t":{"0":23,"1":-2}}', "startingOffsets", "latest")
    assert parsed == {("t", 0): 23, ("t", 1): -2}
    with pytest.raises(OffsetError):
        offsets.parse_offset_option('{"t":{"0":-3}}', "startingOffsets", "latest")
    with pytest.raises(OffsetError):
        offsets.parse_offset_option("yesterday", "startingOffsets", "latest")


def test_resolve_replaces_minus_one_and_two_and_requires_every_partition():
    spec = offsets.parse_offset_option('{"t":{"0":-2,"1":-1,"2":7}}', "s", "latest")
    tps = [("t", 0), ("t", 1), ("t", 2)]
    earliest = {tp: 3 for tp in tps}
    latest = {tp: 100 for tp in tps}
    assert offsets.resolve(spec, tps, earliest, latest, "s") == {("t", 0): 3, ("t", 1): 100, ("t", 2): 7}
    assert offsets.resolve("earliest", tps, earliest, latest, "s") == earliest
    with pytest.raises(OffsetError, match="t-3"):
        offsets.resolve(spec, tps + [("t", 3)], {**earliest, ("t", 3): 0}, {**latest, ("t", 3): 0}, "s")


def test_admit_without_limit_takes_everything():
    start = {("t", 0): 5, ("t", 1): 0}
    latest = {("t", 0): 10, ("t", 1): 3, ("t", 2): 4}  # partition 2 is new
    assert offsets.admit(start, latest, None) == {("t", 0): 10, ("t", 1): 3, ("t", 2): 4}


def test_admit_never_moves_backwards():
    assert offsets.admit({("t", 0): 50}, {("t", 0): 10}, 5) == {("t", 0): 50}


@given(st.dictionaries(tps, st.tuples(st.integers(0, 1000), st.integers(0, 5000)), min_size=1, max_size=10),
       st.integers(1, 3000))
def test_admit_respects_the_limit_and_makes_progress(ranges, limit):
    start = {tp: a for tp, (a, _) in ranges.items()}
    latest = {tp: a + n for tp, (a, n) in ranges.items()}
    ends = offsets.admit(start, latest, limit)
    admitted = sum(ends[tp] - start[tp] for tp in start)
    waiting = sum(latest[tp] - start[tp] for tp in start)
    assert admitted == min(limit, waiting)  # exactly the limit when there is enough, so batches progress
    for tp, first in start.items():
        assert first <= ends[tp] <= latest[tp]
    assert offsets.admit(start, latest, limit) == ends  # deterministic: a replanned batch is the same


def test_admit_spreads_in_proportion():
    start = {("t", 0): 0, ("t", 1): 0}
    latest = {("t", 0): 3000, ("t", 1): 1000}
    assert offsets.admit(start, latest, 1000) == {("t", 0): 750, ("t", 1): 250}


def test_cap_hides_offsets_and_partitions_after_the_target():
    latest = {("t", 0): 100, ("t", 1): 50, ("t", 2): 9}
    target = {("t", 0): 80, ("t", 1): 60}
    assert offsets.cap(latest, target) == {("t", 0): 80, ("t", 1): 50}
    assert offsets.cap(latest, None) == latest


def test_ranges_skip_empty_partitions():
    assert offsets.ranges({("t", 0): 5, ("t", 1): 2}, {("t", 0): 5, ("t", 1): 9, ("u", 0): 1}) == [
        ("t", 1, 2, 9), ("u", 0, 0, 1)]
