"""The metrics endpoint on a cluster: after a broker is killed, the survivor's scrape shows the
under-replicated partition it leads, the partition left without a leader (counted by the active
controller), and exactly one active controller among the live brokers."""

from __future__ import annotations

from cluster_helpers import create_topic

from eoslog.testing.cluster import embedded_cluster
from eoslog.testing.metrics import scrape
from eoslog.testing.process import free_port
from eoslog.testing.wait import wait_until

CLUSTER_ONLY = ("kafka_server_replicamanager_underreplicatedpartitions",
                "kafka_controller_kafkacontroller_offlinepartitionscount",
                "kafka_controller_kafkacontroller_activecontrollercount",
                "kafka_server_replicamanager_leadercount", "kafka_server_replicamanager_isrshrinks_total")


def _scrape(port: int) -> dict[str, float]:
    return {s.name: s.value for s in scrape(port) if s.name in CLUSTER_ONLY}


def test_under_replicated_offline_and_controller_after_a_broker_dies(tmp_path):
    metrics_ports: dict[int, int] = {}

    def with_metrics(broker_id: int, port: int) -> dict[str, str]:
        metrics_ports[broker_id] = free_port()
        return {"eoslog.metrics.listen": f"127.0.0.1:{metrics_ports[broker_id]}"}

    with embedded_cluster(2, tmp_path, broker_properties=with_metrics) as cluster:
        create_topic(cluster, "mirrored", 1, 2)
        create_topic(cluster, "single", 2, 1)
        state = cluster.state()
        survivor = state.leader_of("mirrored", 0)
        victim = next(b for b in cluster.brokers if b != survivor)
        assert {state.leader_of("single", p) for p in range(2)} == {survivor, victim}
        before = {b: _scrape(metrics_ports[b]) for b in cluster.brokers}
        assert sum(m["kafka_controller_kafkacontroller_activecontrollercount"] for m in before.values()) == 1
        assert before[survivor]["kafka_server_replicamanager_underreplicatedpartitions"] == 0
        assert before[survivor]["kafka_server_replicamanager_leadercount"] >= 2  # mirrored-0 and one single-*

        cluster.broker(victim).kill()
        cluster.wait_for(lambda s: s.isr_of("mirrored", 0) == (survivor,) and s.controller == survivor, 30,
                         "the survivor alone in the ISR, and the controller")
        after = wait_until(lambda: (m := _scrape(metrics_ports[survivor]))
                           ["kafka_controller_kafkacontroller_offlinepartitionscount"] == 1
                           and m["kafka_server_replicamanager_underreplicatedpartitions"] == 1 and m,
                           15, "the survivor reports one under-replicated and one offline partition")
        assert after["kafka_controller_kafkacontroller_activecontrollercount"] == 1
