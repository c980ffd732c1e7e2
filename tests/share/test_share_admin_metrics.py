"""Share-partition metrics on the broker's Prometheus endpoint, scraped over HTTP and read with
prometheus_client's parser: records acquired now, in flight, archived, the start offset and the lag of each
share partition. The archived counter is also checked on the pure core: every record entering ARCHIVED is
counted once (a reject, the delivery limit, an aborted record skipped), and nothing else is."""

from __future__ import annotations

import pytest
from share_helpers import CONFIG, LIMIT, S, ack, batches, partition, run
from test_share_wire import acknowledge, acquired, fetch, join, setup_group

from eoslog.client.connection import BrokerConnection
from eoslog.share import AcknowledgeType as A
from eoslog.testing.embedded import EmbeddedBroker
from eoslog.testing.metrics import scrape

pytestmark = pytest.mark.interop


def test_the_core_counts_each_archived_record_once():
    p = partition(run(0, 9, S.ACQUIRED, 1))
    rejected = p.acknowledge("m", [ack(0, 1, A.ACCEPT), ack(2, 4, A.REJECT), ack(5, 9, A.RELEASE)], now_ms=0).after
    assert rejected.archived_total == 3
    again = rejected.acknowledge("m", [ack(5, 9, A.ACCEPT)], now_ms=0).after  # not acquired: refused, no count
    assert again.archived_total == 3
    # at the delivery limit a released record is archived instead of coming back
    last = partition(run(0, 1, S.ACQUIRED, LIMIT))
    assert last.acknowledge("m", [ack(0, 1, A.RELEASE)], now_ms=0).after.archived_total == 2
    # records of an aborted transaction are archived when skipped by an acquisition
    fresh = partition(start=0, end=0)
    skipped = fresh.acquire("m", 0, batches((0, 4)), now_ms=0, max_records=10, upper_bound=5,
                            aborted=batches((0, 1)))
    assert skipped.after.archived_total == 2 and skipped.after.acquired_count() == 3
    assert partition(run(0, 1, S.AVAILABLE), config=CONFIG).expire_locks(10 ** 9).after.archived_total == 0


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("share-metrics"),
                        properties={"eoslog.metrics.listen": "127.0.0.1:0"}) as embedded:
        yield embedded


def share_samples(broker, group: str) -> dict[str, float]:
    return {s.name.removeprefix("eoslog_share_partition_"): s.value for s in scrape(broker.broker.metrics.bound_port)
            if s.name.startswith("eoslog_share_partition_") and s.labels.get("group") == group
            and not s.name.endswith("_created")}


def test_share_partition_metrics_are_scraped(broker):
    topic, group = setup_group(broker.bootstrap, records=10)
    with BrokerConnection.from_bootstrap(broker.bootstrap) as conn:
        member, _, topic_id = join(conn, group, topic)
        assert acquired(fetch(conn, group, member, 0, topic_id)) == [(0, 9, 1)]
        assert share_samples(broker, group) == {"acquired_records": 10, "in_flight_records": 10,
                                                "archived_records_total": 0, "start_offset": 0, "lag": 10,
                                                "transaction_held_records": 0, "overdue_transactions": 0}
        answer = acknowledge(conn, group, member, 1, topic_id, [(0, 2, 1), (5, 6, 3), (7, 7, 2)])
        assert answer.responses[0].partitions[0].error_code == 0
        # 3-4 and 8-9 still acquired, 7 released; 0-2 accepted (the start offset moved), 5-6 rejected
        assert share_samples(broker, group) == {"acquired_records": 4, "in_flight_records": 7,
                                                "archived_records_total": 2, "start_offset": 3,
                                                "lag": 10 - 3 - 2, "transaction_held_records": 0,
                                                "overdue_transactions": 0}
        sample = next(s for s in scrape(broker.broker.metrics.bound_port)
                      if s.name == "eoslog_share_partition_lag" and s.labels.get("group") == group)
        assert sample.labels == {"group": group, "topic": topic, "partition": "0"}
