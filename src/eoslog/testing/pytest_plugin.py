"""A pytest plugin (entry point ``eoslog``): the ``eoslog_broker`` fixture yields a real broker's
bootstrap address, so any Python project can test against Kafka without a JVM or Docker. The cluster
and ZooKeeper fixtures (``eoslog_cluster*``, ``zookeeper*``) need Java and Debian's ``zookeeper``;
``postgres_server`` needs Debian's ``postgresql`` and psycopg."""

from __future__ import annotations

import pytest


@pytest.fixture
def eoslog_broker(tmp_path):
    """A fresh embedded broker per test: its bootstrap address, e.g. ``"127.0.0.1:40123"``."""
    from eoslog.server.embedded import EmbeddedBroker

    with EmbeddedBroker(data_dir=tmp_path / "eoslog-data") as broker:
        yield broker.bootstrap


@pytest.fixture
def eoslog_embedded(tmp_path):
    """Like ``eoslog_broker`` but yields the :class:`EmbeddedBroker` itself (bootstrap, call, stop)."""
    from eoslog.server.embedded import EmbeddedBroker

    with EmbeddedBroker(data_dir=tmp_path / "eoslog-data") as broker:
        yield broker


@pytest.fixture
def eoslog_cluster(tmp_path):
    """A fresh 3-broker cluster with a real ZooKeeper (Debian's ``zookeeper`` package and Java needed):
    an :class:`eoslog.testing.cluster.EmbeddedCluster` with ``.bootstrap``, ``.broker(id)`` handles to
    kill/pause/resume/restart, ``.zookeeper.nodes``, and ``.state()`` / ``.wait_for()`` reading ZooKeeper."""
    from eoslog.tools.local.cluster import EmbeddedCluster

    with EmbeddedCluster(tmp_path / "eoslog-cluster", brokers=3) as cluster:
        yield cluster


@pytest.fixture
def eoslog_cluster_factory(tmp_path):
    """``make(brokers=3, zookeeper_nodes=1, properties=None, session_timeout_ms=4000)`` -> a started
    cluster; every cluster made is stopped after the test."""
    from eoslog.tools.local.cluster import EmbeddedCluster

    made: list[EmbeddedCluster] = []

    def make(brokers: int = 3, **kwargs) -> EmbeddedCluster:
        cluster = EmbeddedCluster(tmp_path / f"eoslog-cluster-{len(made)}", brokers, **kwargs)
        made.append(cluster)
        return cluster.start()

    yield make
    for cluster in made:
        cluster.stop()


@pytest.fixture
def zookeeper(tmp_path):
    """A started standalone ZooKeeper (Debian's ``zookeeper`` package and Java needed): an
    :class:`eoslog.testing.zookeeper.ZooKeeperEnsemble` with ``.connect_string`` and ``.nodes[0]`` to
    kill/pause/resume/restart; stopped after the test."""
    from eoslog.tools.local.zookeeper import ZooKeeperEnsemble

    with ZooKeeperEnsemble(tmp_path / "zookeeper", nodes=1) as ensemble:
        yield ensemble


@pytest.fixture
def zookeeper_ensemble(tmp_path):
    """``make(nodes=1|3)`` -> a started ZooKeeper (standalone or a quorum of three); every one made is
    stopped after the test."""
    from eoslog.tools.local.zookeeper import ZooKeeperEnsemble

    made: list[ZooKeeperEnsemble] = []

    def make(nodes: int = 1) -> ZooKeeperEnsemble:
        ensemble = ZooKeeperEnsemble(tmp_path / f"zookeeper-{len(made)}", nodes)
        made.append(ensemble)
        return ensemble.start()

    yield make
    for ensemble in made:
        ensemble.stop()


@pytest.fixture(scope="module")
def postgres_server():
    """A started throw-away PostgreSQL server shared by a test module (Debian's ``postgresql`` package and
    psycopg needed): an :class:`eoslog.testing.postgres.PostgresServer`; ``create_database(name)`` gives
    each test its own database and returns its DSN. Stopped and removed after the module."""
    from eoslog.testing.postgres import PostgresServer

    with PostgresServer() as server:
        yield server
