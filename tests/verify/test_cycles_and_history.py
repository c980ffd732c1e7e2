"""Tarjan SCC and witness cycles; the history file format round trip; scale; the plot."""

from __future__ import annotations

import itertools
import json
import random
import time

import pytest

from eoslog.verify import HistoryWriter, check, pair, read_history
from eoslog.verify.cycles import find_cycle, strongly_connected_components
from eoslog.verify.history import parse_event

from .builder import History, poll, send


def test_scc_finds_components_and_ignores_acyclic_parts():
    graph = {1: [2], 2: [3], 3: [1, 4], 4: [5], 5: [4], 6: [1]}
    components = sorted(sorted(c) for c in strongly_connected_components(graph))
    assert components == [[1, 2, 3], [4, 5]]
    assert strongly_connected_components({1: [2], 2: [3], 3: []}) == []


def test_scc_handles_long_chains_without_recursion():
    n = 200_000
    chain = {i: [i + 1] for i in range(n)}
    assert strongly_connected_components(chain) == []
    chain[n] = [0]
    components = strongly_connected_components(chain)
    assert len(components) == 1 and len(components[0]) == n + 1


def test_find_cycle_is_short_and_closed():
    graph = {1: [2, 5], 2: [3], 3: [4], 4: [1], 5: [1]}
    cycle = find_cycle(graph, [1, 2, 3, 4, 5], first_edge=(1, 5))
    assert cycle == [1, 5, 1]
    cycle = find_cycle(graph, [1, 2, 3, 4], first_edge=(1, 2))
    assert cycle == [1, 2, 3, 4, 1]
    for a, b in itertools.pairwise(cycle):
        assert b in graph[a]


def test_history_writer_round_trip(tmp_path):
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as writer:
        writer.record(0, "invoke", "txn", [send("t-0", 1)])
        writer.record(0, "ok", "txn", [send("t-0", 1, 0)])
        writer.record(1, "ok", "assign", ["t-0"])
        writer.record(1, "invoke", "txn", [poll()], final=True)
        writer.record(1, "ok", "txn", [poll({"t-0": [(0, 1)]})], final=True)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["index"] for line in lines] == [0, 1, 2, 3, 4]
    assert lines[4]["value"] == [["poll", {"t-0": [[0, 1]]}]] and lines[4]["final"] is True
    events = read_history(path)
    txns, process_events = pair(events)
    assert [t.outcome for t in txns] == ["ok", "ok"]
    assert [e.f for e in process_events] == ["assign"]
    report = check(path)
    assert report.valid and report.anomalies == {} and report.has_final_read


def test_pairing_rules():
    events = [parse_event(line, i) for i, line in enumerate([
        {"process": 0, "type": "invoke", "f": "txn", "value": [["send", "k", 1]]},
        {"process": 0, "type": "invoke", "f": "txn", "value": [["send", "k", 2]]},  # first left pending
        {"process": 0, "type": "fail", "f": "txn"},  # no value: keeps the invocation's micro-ops
        {"process": 1, "type": "invoke", "f": "txn", "value": [["send", "k", 3]]},
    ])]
    txns, _ = pair(events)
    assert [(t.outcome, t.mops[0].value) for t in txns] == [("info", 1), ("fail", 2), ("info", 3)]


def synthetic_history(transactions: int, seed: int = 1, keys: int = 16) -> list[dict]:
    """A valid history: producers send 1-3 values per transaction (some abort, some end indefinite),
    consumers each read their keys in order, then a final read of everything."""
    rng = random.Random(seed)
    h = History()
    next_offset = [0] * keys
    log: list[list[tuple[int, int]]] = [[] for _ in range(keys)]  # committed (offset, value) per key
    positions = {c: [0] * keys for c in range(4)}
    value = 0
    for i in range(transactions):
        if i % 5 == 4:  # a consumer poll of its four keys
            consumer = rng.randrange(4)
            results = {}
            for k in range(consumer * 4, consumer * 4 + 4):
                start = positions[consumer][k]
                results[f"t-{k}"] = log[k][start:start + 3]
                positions[consumer][k] = start + len(results[f"t-{k}"])
            h.txn(100 + consumer, "ok", [poll(results)])
            continue
        outcome = rng.choices(["ok", "fail", "info"], [90, 7, 3])[0]
        visible = outcome == "ok" or (outcome == "info" and rng.random() < 0.5)
        mops = []
        for _ in range(rng.randint(1, 3)):
            k = rng.randrange(keys)
            value += 1
            offset = next_offset[k]
            next_offset[k] += 1
            mops.append(send(f"t-{k}", value, offset if outcome != "info" else None))
            if visible:
                log[k].append((offset, value))
        for k in {int(m[1][2:]) for m in mops}:
            next_offset[k] += 1  # the transaction marker
        h.txn(i % 8, outcome, mops)
    h.txn(200, "ok", [poll({f"t-{k}": log[k] for k in range(keys)})], final=True)
    return h.lines


def test_synthetic_history_is_valid_and_a_removed_read_is_caught():
    lines = synthetic_history(3_000)
    report = check(lines)
    assert report.valid and report.anomalies == {}, report.render_text()
    # Drop one value from the final read: the checker must notice.
    final = lines[-1]["value"][0][1]
    key = next(k for k, pairs in final.items() if len(pairs) > 2)
    del final[key][1]
    broken = check(lines)
    assert not broken.valid and "unseen" in broken.errors


@pytest.mark.slow
def test_checker_handles_a_hundred_thousand_transactions_in_seconds():
    lines = synthetic_history(100_000)
    started = time.perf_counter()
    report = check(lines)
    elapsed = time.perf_counter() - started
    assert report.valid, report.render_text()
    assert report.stats["ops"] == 100_001
    assert elapsed < 60, f"{elapsed:.1f}s"
    print(f"checked {report.stats['ops']} transactions in {elapsed:.2f}s")


def test_plot_writes_a_png(tmp_path):
    lines = synthetic_history(500)
    start = lines[0]["time"]
    faults = [(start + 1.0, start + 2.0, "pause"), (start + 3.0, start + 3.0, "cut"),
              {"start": start + 2.5, "end": start + 4.0, "label": "drop=0.1"}]
    from eoslog.verify.plot import plot

    path = plot(lines, faults, tmp_path / "throughput.png", title="synthetic")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5_000
