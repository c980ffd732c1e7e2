"""The console's chart series and sparklines (no I/O)."""

from __future__ import annotations

from eoslog.console.history import GroupLag, LagHistory, Series, sparkline


def test_rates_are_per_second_and_never_negative() -> None:
    series = Series()
    for at, total in [(0.0, 100), (2.0, 300), (2.0, 999), (4.0, 300), (5.0, 250), (6.0, 260)]:
        series.add(at, total)
    assert series.values() == [100, 300, 300, 250, 260]  # the second sample at 2.0 s is dropped
    assert series.rates() == [100.0, 0.0, 0.0, 10.0]


def test_the_series_keeps_the_newest_samples() -> None:
    series = Series(max_points=3)
    for at in range(5):
        series.add(float(at), at * 10)
    assert series.values() == [20, 30, 40]


def test_sparkline_puts_the_largest_value_at_the_top() -> None:
    assert sparkline([5]) == ""
    points = [tuple(map(float, p.split(","))) for p in sparkline([0, 10, 5], width=102, height=22, pad=1).split()]
    assert points == [(1.0, 21.0), (51.0, 1.0), (101.0, 11.0)]
    assert {y for _, y in (tuple(map(float, p.split(","))) for p in sparkline([0, 0]).split())} == {38.0}


def test_each_partition_keeps_its_own_bounded_lag_series() -> None:
    group = GroupLag(max_points=10, partition_points=3)
    for at in range(5):
        group.add(float(at), {("t", 0): at, ("t", 1): 7, ("t", 2): None})
    group.add(4.0, {("t", 0): 99, ("t", 1): 99})  # the same moment again: one sample is enough
    assert group.values(("t", 0)) == [2, 3, 4] and group.values(("t", 1)) == [7, 7, 7]
    assert group.values(("t", 2)) == []  # nothing committed there: nothing drawn
    assert group.total.values() == [7, 8, 9, 10, 11]
    group.add(5.0, {("t", 1): 1})  # the group has no offset in t-0 any more: its points go with it
    assert set(group.partitions) == {("t", 1)} and group.values(("t", 1)) == [7, 7, 1]


def test_the_least_recently_sampled_groups_are_forgotten_beyond_the_bound() -> None:
    history = LagHistory(max_values=12, partition_points=3)  # 4 partitions' worth of points
    two = {("t", 0): 1, ("t", 1): 1}
    history.add("a", 0.0, two)
    history.add("b", 0.0, two)
    assert list(history.groups) == ["a", "b"]
    history.add("a", 1.0, two)  # a is now the most recent
    history.add("c", 0.0, two)  # 6 partitions' worth: b goes
    assert list(history.groups) == ["a", "c"]
    big = {("t", p): 0 for p in range(10)}
    history.add("d", 0.0, big)  # over the bound alone: kept, every other group forgotten
    assert list(history.groups) == ["d"]


def test_sparkline_leaves_out_the_points_inside_a_level_run() -> None:
    points = sparkline([3, 3, 3, 5, 5, 5], width=52, height=12, pad=1, decimals=0).split()
    assert points == ["1,5", "21,5", "31,1", "51,1"]  # the run's ends are kept, so the step stays where it was
    assert sparkline([0] * 60, decimals=0).split() == ["2,38", "238,38"]


def test_a_level_is_a_flat_line_from_its_first_sample():
    """The group page's lag charts: one sample of a lag is a line at its height (issue 40: the charts were
    empty until the second poll); two or more are the sparkline itself."""
    from eoslog.console.history import level_line

    assert level_line([]) == ""
    assert level_line([7]) == sparkline([7, 7]) != ""
    assert level_line([0, 10, 5]) == sparkline([0, 10, 5])

