"""On a 3-broker cluster `eoslog topics describe` asks each partition leader once per (timestamp,
isolation level), three ListOffsets at every broker that leads a partition of the topic and none at the
others, and `transactions find-hanging` one DescribeProducers per leader; counted by each broker's
request metrics endpoint. The offsets described are per partition, as a Kafka client reads them."""

from __future__ import annotations

import json

import confluent_kafka
import pytest
from click.testing import CliRunner
from cluster_helpers import create_topic, described_at

from eoslog.testing.cluster import embedded_cluster
from eoslog.testing.metrics import requests_total
from eoslog.testing.process import free_port
from eoslog.testing.wait import wait_until
from eoslog.tools.topics_cli import topics_group
from eoslog.tools.txn_cli import transactions_group

pytestmark = pytest.mark.interop
PARTITIONS = 6


def run(group, *args: str) -> str:
    result = CliRunner().invoke(group, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_describe_and_find_hanging_ask_each_leader_once(tmp_path):
    metrics_ports: dict[int, int] = {}

    def with_metrics(broker_id: int, port: int) -> dict[str, str]:
        metrics_ports[broker_id] = free_port()
        return {"eoslog.metrics.listen": f"127.0.0.1:{metrics_ports[broker_id]}"}

    with embedded_cluster(3, tmp_path, broker_properties=with_metrics) as cluster:
        create_topic(cluster, "spread", PARTITIONS, 1)
        state = cluster.state()
        leaders = {p: state.leader_of("spread", p) for p in range(PARTITIONS)}
        producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap})
        for p in range(PARTITIONS):
            for _ in range(p + 1):
                producer.produce("spread", value=b"x", partition=p)
        assert producer.flush(30) == 0
        bootstrap = cluster.broker(next(iter(cluster.brokers))).bootstrap  # whichever; it need lead nothing

        def described():  # once the broker asked has heard of the topic and has every partition's leader
            view = described_at(bootstrap, "spread")
            return view if view and all(p["leader"] == leaders[p["partition"]] for p in view["partitions"]) else None

        wait_until(described, 30, "the broker's metadata")
        asked = next(iter(cluster.brokers))
        before = {(b, r): requests_total(port, r) for b, port in metrics_ports.items() for r in ("ListOffsets", "Metadata")}
        [view] = json.loads(run(topics_group, "describe", "spread", "-b", bootstrap, "--json"))
        sent = {k: requests_total(metrics_ports[k[0]], k[1]) - v for k, v in before.items()}
        assert {b: sent[(b, "ListOffsets")] for b in metrics_ports} == \
            {b: 3 if b in leaders.values() else 0 for b in metrics_ports}, (sent, leaders)
        # the topic's Metadata (naming the leaders) and the broker list, at the broker asked; none per partition
        assert {b: sent[(b, "Metadata")] for b in metrics_ports} == {b: 2 if b == asked else 0 for b in metrics_ports}
        assert {p["partition"]: (p["leader"], p["high_watermark"], p["last_stable_offset"], p["error"])
                for p in view["partitions"]} == {p: (leaders[p], p + 1, p + 1, None) for p in range(PARTITIONS)}

        before = {b: requests_total(port, "DescribeProducers") for b, port in metrics_ports.items()}
        run(transactions_group, "find-hanging", "-b", bootstrap)
        sent = {b: requests_total(port, "DescribeProducers") - before[b] for b, port in metrics_ports.items()}
        assert sent == {b: 1 if b in leaders.values() else 0 for b in metrics_ports}, (sent, leaders)
