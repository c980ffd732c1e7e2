"""Transactions end to end with real clients: every producer client commits and aborts transactions
over several topics and partitions; every consumer client reads them read_committed and
read_uncommitted. read_committed never sees aborted or undecided records; read_uncommitted sees all."""

from __future__ import annotations

import pytest
from txn_clients import CLIENTS, READERS, create_topics, expected_values, run_plan


def make_plan(prefix: str, topics: dict[str, int]):
    tps = [(t, p) for t, count in topics.items() for p in range(count)]
    plan = []
    for n, outcome in enumerate(["commit", "abort", "commit", "abort", "commit", "open"]):
        records = [(t, p, f"{prefix}-{outcome}{n}-{t}-{p}-{i}".encode()) for i in range(4) for t, p in tps]
        plan.append((outcome, records))
    return plan, tps


@pytest.mark.parametrize("producer_client", CLIENTS)
def test_transactions_are_isolated_for_every_client(txn_broker, producer_client):
    bootstrap = txn_broker.bootstrap
    topics = {f"txn-{producer_client}-a": 3, f"txn-{producer_client}-b": 2}
    create_topics(bootstrap, topics)
    plan, tps = make_plan(producer_client, topics)
    producer = run_plan(producer_client, bootstrap, f"tx-{producer_client}", plan)
    try:
        committed = expected_values(plan, {"commit"})
        everything = expected_values(plan, {"commit", "abort", "open"})
        for reader_client, read in READERS.items():
            got = read(bootstrap, tps, "read_committed")
            assert got == committed, f"{reader_client} read_committed"
            got = read(bootstrap, tps, "read_uncommitted")
            assert got == everything, f"{reader_client} read_uncommitted"
        # Deciding the open transaction moves the last stable offset past it.
        producer.finish_open(commit=True)
        got = READERS["confluent"](bootstrap, tps, "read_committed")
        assert got == expected_values(plan, {"commit", "open"})
    finally:
        producer.close()
