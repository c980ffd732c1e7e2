"""The leader-epoch cache and its checkpoint file (log/leader_epoch.py; docs/storage-format.md)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from eoslog.log.leader_epoch import (
    FILE_NAME,
    UNDEFINED_EPOCH,
    UNDEFINED_OFFSET,
    LeaderEpochCache,
    divergence_offset,
)


def cache_with(tmp_path, entries) -> LeaderEpochCache:
    cache = LeaderEpochCache.open(tmp_path)
    for epoch, offset in entries:
        cache.assign(epoch, offset)
    return cache


def test_file_format_byte_for_byte_and_reopen(tmp_path):
    cache = cache_with(tmp_path, [(0, 0), (1, 47601), (4, 52210)])
    assert (tmp_path / FILE_NAME).read_text() == "0\n3\n0 0\n1 47601\n4 52210\n"
    assert LeaderEpochCache.open(tmp_path).entries == [(0, 0), (1, 47601), (4, 52210)]


def test_assign_rules(tmp_path):
    cache = cache_with(tmp_path, [(2, 10)])
    cache.assign(1, 20)  # lower epoch: ignored
    cache.assign(2, 30)  # the latest again at another offset: ignored
    assert cache.entries == [(2, 10)]
    cache.assign(3, 40)
    cache.assign(5, 35)  # a new epoch starting before an existing entry: that entry diverged
    assert cache.entries == [(2, 10), (5, 35)]
    assert cache.latest_epoch == 5
    assert LeaderEpochCache.open(tmp_path).latest_epoch == 5


def test_end_offset_for(tmp_path):
    cache = cache_with(tmp_path, [(1, 0), (2, 100), (4, 150)])
    assert cache.end_offset_for(4, 200) == (4, 200)  # the latest ends at the log end
    assert cache.end_offset_for(2, 200) == (2, 150)
    assert cache.end_offset_for(3, 200) == (2, 150)  # unknown epoch: the largest below it
    assert cache.end_offset_for(0, 200) == (0, 0)  # older than all: where the first starts
    assert cache.end_offset_for(5, 200) == (UNDEFINED_EPOCH, UNDEFINED_OFFSET)
    (tmp_path / "empty").mkdir()
    assert LeaderEpochCache.open(tmp_path / "empty").end_offset_for(1, 5) == (UNDEFINED_EPOCH, UNDEFINED_OFFSET)


def test_truncation_from_either_end(tmp_path):
    cache = cache_with(tmp_path, [(0, 0), (1, 100), (2, 150)])
    cache.truncate_from_end(150)
    assert cache.entries == [(0, 0), (1, 100)]
    cache.truncate_from_start(120)
    assert cache.entries == [(1, 120)]
    cache.clear()
    assert cache.entries == [] and LeaderEpochCache.open(tmp_path).entries == []


def test_damaged_file_is_treated_as_empty_and_stray_temp_file_removed(tmp_path):
    (tmp_path / FILE_NAME).write_text("0\n3\n0 0\n")  # says 3 entries, has 1
    (tmp_path / (FILE_NAME + ".tmp")).write_text("half written")
    assert LeaderEpochCache.open(tmp_path).entries == []
    assert not (tmp_path / (FILE_NAME + ".tmp")).exists()
    (tmp_path / FILE_NAME).write_text("7\n0\n")  # unknown version
    assert LeaderEpochCache.open(tmp_path).entries == []


def test_kip_101_follower_behind_by_one_epoch(tmp_path):
    # Follower A has epoch 1 data up to 120 the leader never got; the leader started epoch 2 at 110.
    (tmp_path / "leader").mkdir()
    (tmp_path / "a").mkdir()
    leader = cache_with(tmp_path / "leader", [(0, 0), (1, 50), (2, 110)])
    follower = cache_with(tmp_path / "a", [(0, 0), (1, 50)])
    epoch, end = leader.end_offset_for(follower.latest_epoch, 300)
    assert (epoch, end) == (1, 110)
    assert divergence_offset(follower, 120, epoch, end) == 110  # not the high watermark


def test_kip_279_two_fast_failovers(tmp_path):
    # A led epoch 2 from 150 and wrote to 170 alone; the new leader never saw epoch 2 (it went 1 -> 3 at 160).
    (tmp_path / "l").mkdir()
    (tmp_path / "a").mkdir()
    leader = cache_with(tmp_path / "l", [(0, 0), (1, 100), (3, 160)])
    follower = cache_with(tmp_path / "a", [(0, 0), (1, 100), (2, 150)])
    epoch, end = leader.end_offset_for(2, 400)
    assert (epoch, end) == (1, 160)  # the leader knows no epoch 2: epoch 1 ends at 160 there
    # Our epoch 1 ends at 150: everything from 150 (our epoch 2) is divergent.
    assert divergence_offset(follower, 170, epoch, end) == 150


def test_undefined_answer_means_fall_back(tmp_path):
    follower = cache_with(tmp_path, [(5, 0)])
    assert divergence_offset(follower, 10, UNDEFINED_EPOCH, UNDEFINED_OFFSET) is None


@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 1000)), max_size=25), st.integers(0, 25),
       st.integers(0, 1200))
def test_entries_stay_increasing_and_end_offsets_match_a_model(entries, requested, log_end):
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        cache = LeaderEpochCache.open(directory)
        for epoch, offset in entries:
            cache.assign(epoch, offset)
        kept = cache.entries
        assert all(a[0] < b[0] and a[1] < b[1] for a, b in zip(kept, kept[1:]))
        assert LeaderEpochCache.open(directory).entries == kept
        log_end = max([log_end] + [o for _, o in kept])
        answer = cache.end_offset_for(requested, log_end)
        if not kept or requested > kept[-1][0]:
            assert answer == (UNDEFINED_EPOCH, UNDEFINED_OFFSET)
        elif requested == kept[-1][0]:
            assert answer == (requested, log_end)
        elif requested < kept[0][0]:
            assert answer == (requested, kept[0][1])
        else:
            below = [e for e in kept if e[0] <= requested][-1]
            after = [e for e in kept if e[0] > requested][0]
            assert answer == (below[0], after[1])
