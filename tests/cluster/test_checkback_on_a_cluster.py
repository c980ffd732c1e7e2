"""Check-back transactions on a cluster (docs/transactions.md, "Check-back transactions"): a producer child
SIGKILLed after its database commit leaves a transaction that its coordinator moves to Checking; that
coordinator is SIGKILLed too, leadership of the id's __transaction_state partition moves, the new leader
loads the transaction back as Checking from the replicated log, and a resolver -- which polls every broker,
the group's name being coordinated by another partition -- commits it. A read_committed reader then sees
exactly the committed rows' records, once each."""

from __future__ import annotations

import pytest
from cluster_helpers import create_topic

from eoslog.client.checkback import CheckBackProducer
from eoslog.protocol import messages
from eoslog.protocol.coordinator_partition import partition_for
from eoslog.testing.cluster import embedded_cluster
from eoslog.testing.wait import wait_until
from eoslog.tools.brokers import TRANSACTION, Brokers
from tests.transactions.checkback_child import resolve, value_of
from tests.transactions.test_checkback import (
    GROUP,
    PROPERTIES,
    TOPIC,
    answers_for,
    check_delivery,
    run_producer,
)

pytestmark = pytest.mark.interop
TXN_PARTITIONS = 4  # the harness's transaction.state.log.num.partitions
# An id whose __transaction_state partition is not the group name's: only a poll of every broker finds it.
TRANSACTIONAL_ID = next(f"cb-move-{i}" for i in range(100)
                        if partition_for(f"cb-move-{i}", TXN_PARTITIONS) != partition_for(GROUP, TXN_PARTITIONS))


def described_state(bootstrap: str, transactional_id: str) -> str | None:
    try:
        with Brokers(bootstrap, timeout=5) as brokers:
            response = brokers.coordinator(transactional_id, TRANSACTION).request(
                65, 0, messages.DescribeTransactionsRequest(transactional_ids=[transactional_id]))
    except Exception:  # noqa: BLE001 - a coordinator moving: asked again by wait_until
        return None
    described = response.transaction_states[0]
    return described.transaction_state if described.error_code == 0 else None


def test_checking_survives_a_coordinator_move_and_every_broker_is_polled(tmp_path):
    with embedded_cluster(3, tmp_path, properties=PROPERTIES) as cluster:
        create_topic(cluster, TOPIC, 2, 3)
        db = tmp_path / "orders.db"
        crashed = run_producer(cluster, db, TRANSACTIONAL_ID, 2, "after-db-commit")
        wait_until(lambda: described_state(cluster.bootstrap, TRANSACTIONAL_ID) == "Checking", 15,
                   "the abandoned transaction checking")
        index = partition_for(TRANSACTIONAL_ID, TXN_PARTITIONS)
        coordinator = cluster.state().leader_of("__transaction_state", index)
        cluster.broker(coordinator).kill()
        cluster.wait_for(lambda s: (s.leader_of("__transaction_state", index) or -1) not in (-1, coordinator), 30,
                         "the transaction log partition led by another broker")
        survivor = next(b for b in cluster.brokers if b != coordinator)
        bootstrap = cluster.broker(survivor).bootstrap
        wait_until(lambda: described_state(bootstrap, TRANSACTIONAL_ID) == "Checking", 15,
                   "Checking loaded by the new coordinator")
        with CheckBackProducer(bootstrap, GROUP, resolver=lambda txn_id: resolve(str(db), txn_id),
                               poll_wait_ms=500) as resolver:
            wait_until(lambda: ("commit", 0) in answers_for(resolver, crashed), 30, f"{crashed} committed")
        cluster.broker(coordinator).start()
        assert sorted(check_delivery(cluster, db)) == [value_of(0), value_of(1)]
