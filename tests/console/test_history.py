"""The console's chart series and sparklines (no I/O)."""

from __future__ import annotations

from eoslog.console.history import Series, sparkline


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
