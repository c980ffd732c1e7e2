"""Metrics of a cluster member (telemetry.Family values), read on the event loop at scrape time:
Kafka's ReplicaManager gauges (partitions, leaders, under-replicated and under-min-ISR partitions, ISR
shrinks and expands) and KafkaController gauges (active controller, offline partitions; the latter only
on the active controller, as in Kafka, so that a sum over brokers counts each partition once)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.log.telemetry import COUNTER, GAUGE, Family

if TYPE_CHECKING:
    from eoslog.cluster.service import ClusterService


def _families() -> list[Family]:
    return [
        Family("kafka_server_replicamanager_partitioncount", GAUGE, "Replicas on this broker (leaders and followers)"),
        Family("kafka_server_replicamanager_leadercount", GAUGE, "Partitions this broker leads"),
        Family("kafka_server_replicamanager_underreplicatedpartitions", GAUGE,
               "Partitions led here whose ISR is smaller than their replica set"),
        Family("kafka_server_replicamanager_underminisrpartitioncount", GAUGE,
               "Partitions led here whose ISR is below min.insync.replicas"),
        Family("kafka_server_replicamanager_isrshrinks", COUNTER, "ISR shrinks written by this leader"),
        Family("kafka_server_replicamanager_isrexpands", COUNTER, "ISR expansions written by this leader"),
        Family("kafka_controller_kafkacontroller_activecontrollercount", GAUGE,
               "1 on the active controller, 0 elsewhere"),
        Family("kafka_controller_kafkacontroller_offlinepartitionscount", GAUGE,
               "Partitions without a live leader (reported by the active controller only)"),
    ]


def single_node_families(partitions: int) -> list[Family]:
    """A single node leads every partition it has, in sync with itself, and is its own controller: the
    same families with those values, so one dashboard serves both modes."""
    families = _families()
    for family, value in zip(families, (partitions, partitions, 0, 0, 0, 0, 1, 0)):
        family.add(value)
    return families


def replication_families(cluster: ClusterService) -> list[Family]:
    replicas = cluster.replicas
    view = replicas.view
    under_replicated = under_min_isr = 0
    for (topic, index), leader in replicas.leaders.items():
        assignment = view.topics.get(topic)
        assigned = assignment.replicas.get(index, ()) if assignment is not None else ()
        if len(leader.isr) < len(assigned):
            under_replicated += 1
        if len(leader.isr) < replicas.min_isr_for(topic):
            under_min_isr += 1
    controller = cluster.controller
    offline = 0
    if controller.active:
        live = set(cluster.view.brokers)
        offline = sum(1 for state in cluster.view.states.values() if state.leader not in live)
    families = _families()
    values = (len(replicas.partitions), len(replicas.leaders), under_replicated, under_min_isr,
              replicas.isr_shrinks, replicas.isr_expands, int(controller.active), offline)
    for family, value in zip(families, values):
        family.add(value)
    return families
