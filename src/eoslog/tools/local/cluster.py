"""A local cluster for tests and for ``eoslog cluster up``: a real ZooKeeper (one node or an ensemble of
three, Debian's server) and N ``eoslog serve`` processes, each with handles to kill, pause and restart.

    with embedded_cluster(3, tmp_path) as cluster:
        producer = Producer({"bootstrap.servers": cluster.bootstrap, ...})
        cluster.broker(cluster.leader_of("t", 0)).kill()
        cluster.wait_for(lambda s: s.leader_of("t", 0) not in (None, -1), 30)

``proxied=True`` puts each broker behind its own fault proxy (testing/faultproxy.py) and advertises the
proxy's address in the broker's registration, so clients and the other brokers reach it only through
the proxy: ``cluster.cut(1, 2)`` then breaks the link between brokers 1 and 2 while both keep their
ZooKeeper sessions and their clients (the verifier's network partitions; loopback only).

``network=`` (a faults/netns.py Network, already created) runs each ZooKeeper node and each broker in a
network namespace of its own instead, at its address there; ``cut`` then drops packets with nftables.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from eoslog.cluster.zk import layout
from eoslog.cluster.zk.reconnect import connection_retry
from eoslog.tools.local.process import BrokerProcess, free_port
from eoslog.tools.local.zookeeper import ZooKeeperEnsemble

CHROOT = "/eoslog"


@dataclass
class ClusterState:
    """What ZooKeeper says right now (read directly, not through any broker)."""

    brokers: set[int] = field(default_factory=set)
    controller: int = -1
    controller_epoch: int = 0
    partitions: dict[tuple[str, int], layout.PartitionState] = field(default_factory=dict)
    replicas: dict[tuple[str, int], tuple[int, ...]] = field(default_factory=dict)

    def leader_of(self, topic: str, partition: int) -> int | None:
        state = self.partitions.get((topic, partition))
        return None if state is None else state.leader

    def isr_of(self, topic: str, partition: int) -> tuple[int, ...]:
        state = self.partitions.get((topic, partition))
        return () if state is None else state.isr

    def epoch_of(self, topic: str, partition: int) -> int:
        state = self.partitions.get((topic, partition))
        return -1 if state is None else state.leader_epoch


class EmbeddedCluster:
    def __init__(self, base_dir: Path, brokers: int = 3, zookeeper_nodes: int = 1,
                 properties: dict[str, str] | None = None, session_timeout_ms: int = 4000,
                 file_size_limits: dict[int, int] | None = None, proxied: bool = False,
                 broker_properties: Callable[[int, int], dict[str, str]] | None = None,
                 before_brokers: Callable[[str], None] | None = None, network=None) -> None:
        if network is not None and proxied:
            raise ValueError("a cluster in network namespaces has no fault proxies")
        self.base_dir = Path(base_dir)
        self.network = network
        self.zookeeper = ZooKeeperEnsemble(self.base_dir / "zookeeper", nodes=zookeeper_nodes, network=network)
        self.session_timeout_ms = session_timeout_ms
        factor = str(min(3, brokers))
        self.properties = {
            "zookeeper.session.timeout.ms": str(session_timeout_ms),
            "offsets.topic.replication.factor": factor,
            "transaction.state.log.replication.factor": factor,
            "transaction.state.log.min.isr": str(min(2, brokers)),
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.num.partitions": "4",
            **(properties or {}),
        }
        self.brokers: dict[int, BrokerProcess] = {}
        self._count = brokers
        self._file_size_limits = file_size_limits or {}
        self._zk_client = None
        self.proxied = proxied
        # (broker id, primary port) -> that broker's own properties, e.g. its `listeners` with their ports
        self.broker_properties = broker_properties
        self.proxies: dict = {}  # broker id -> FaultProxy, when proxied
        # Called with zookeeper.connect once ZooKeeper runs, before any broker: e.g. `eoslog users add --zookeeper`.
        self.before_brokers = before_brokers

    # ---- lifecycle ------------------------------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> EmbeddedCluster:
        self.zookeeper.start()
        connect = self.zookeeper.connect_string_with_chroot(CHROOT)
        if self.before_brokers is not None:
            self.before_brokers(connect)
        for broker_id in range(1, self._count + 1):
            port = free_port() if self.network is None else 9092
            host = "127.0.0.1" if self.network is None else self.network.broker_address(broker_id)
            advertised = None
            if self.proxied:
                from eoslog.tools.local.faultproxy import FaultProxy

                proxy = self.proxies[broker_id] = FaultProxy("127.0.0.1", port, seed=broker_id)
                advertised = f"127.0.0.1:{proxy.start_in_thread()}"
            self.brokers[broker_id] = BrokerProcess(
                data_dir=self.base_dir / f"broker-{broker_id}" / "data", port=port,
                properties={"broker.id": str(broker_id), "zookeeper.connect": connect, **self.properties,
                            **(self.broker_properties(broker_id, port) if self.broker_properties else {})},
                log_path=self.base_dir / f"broker-{broker_id}.log",
                file_size_limit=self._file_size_limits.get(broker_id), advertised=advertised, host=host,
                launcher=() if self.network is None else tuple(self.network.launcher(host)))
        # All launched first: the interpreters start side by side, then each is waited for.
        for broker in self.brokers.values():
            broker.launch()
        for broker in self.brokers.values():
            broker.wait_ready(timeout)
        self.wait_for(lambda s: len(s.brokers) == self._count and s.controller in self.brokers, timeout,
                      "every broker registered and a controller elected")
        self._wait_for_complete_views(timeout)
        return self

    def _wait_for_complete_views(self, timeout: float) -> None:
        """Until each broker's own view lists every broker: ZooKeeper has the registrations before the
        brokers' watches deliver them, and a CreateTopics answered meanwhile finds too few live brokers
        for its replication factor (seen under load). Asked with Metadata on the plaintext listener, at
        the address the broker listens on (its network namespace's, when it has one: asked at 127.0.0.1
        such a broker never answered, so it was not waited for and a verify run's CreateTopics found 2 of
        3 brokers); a broker that does not answer there (TLS or SASL only) is not waited for."""
        from eoslog.client.connection import BrokerConnection
        from eoslog.protocol import messages

        deadline = time.monotonic() + timeout
        for broker in self.brokers.values():
            while True:
                try:
                    conn = BrokerConnection(broker.host, broker.port, timeout_s=5.0)
                    try:
                        response = conn.request(3, 4, messages.MetadataRequest(topics=[], allow_auto_topic_creation=False))
                    finally:
                        conn.close()
                except Exception:  # noqa: BLE001 - not a plaintext listener: nothing to wait for here
                    break
                if len(response.brokers) >= self._count:
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"cluster: broker at port {broker.port} sees {len(response.brokers)} of "
                                       f"{self._count} brokers after {timeout} s\n{self.logs()}")
                time.sleep(0.05)

    def stop(self, broker_timeout: float = 60.0) -> None:
        """SIGTERM to every broker, each SIGKILLed if it has not exited within ``broker_timeout``; then
        ZooKeeper."""
        for broker in self.brokers.values():  # every broker told first, so their shutdowns overlap
            with contextlib.suppress(Exception):
                broker.request_stop()
        deadline = time.monotonic() + broker_timeout
        for broker in self.brokers.values():
            with contextlib.suppress(Exception):
                broker.stop(timeout=max(0.0, deadline - time.monotonic()))
        self.release_client()
        self.zookeeper.stop()
        for proxy in self.proxies.values():
            with contextlib.suppress(Exception):
                proxy.stop()

    def __enter__(self) -> EmbeddedCluster:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc_info) -> None:
        self.stop()

    # ---- handles ---------------------------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        if self.proxied:
            return ",".join(f"127.0.0.1:{p.port}" for p in self.proxies.values())
        return ",".join(b.bootstrap for b in self.brokers.values())

    def cut(self, a: int, b: int) -> None:
        """Breaks the link between brokers ``a`` and ``b`` both ways (proxied clusters): each one's
        connections to the other are closed, and new ones too, until :meth:`heal_links`. In network
        namespaces: their packets to each other are dropped."""
        if self.network is not None:
            self.network.cut(self.network.broker_address(a), self.network.broker_address(b))
            return
        self.proxies[b].block_clients(rf"eoslog-.*-{a}")
        self.proxies[a].block_clients(rf"eoslog-.*-{b}")

    def heal_links(self) -> None:
        if self.network is not None:
            self.network.heal()
        for proxy in self.proxies.values():
            proxy.unblock_clients()

    def broker(self, broker_id: int) -> BrokerProcess:
        return self.brokers[broker_id]

    def logs(self) -> str:
        return "\n".join(f"--- broker {i} ---\n{b.log_tail(60)}" for i, b in self.brokers.items())

    # ---- what ZooKeeper says ------------------------------------------------------------------------------

    def release_client(self) -> None:
        """Closes the ZooKeeper client :meth:`state` opened (the next call opens another): `eoslog cluster
        up` reads no state once started, and a client left open would retry, and log, while ZooKeeper is
        down."""
        if self._zk_client is not None:
            with contextlib.suppress(Exception):
                self._zk_client.stop()
                self._zk_client.close()
            self._zk_client = None

    def _client(self):
        from kazoo.client import KazooClient

        if self._zk_client is None:
            # Back within a second of ZooKeeper (cluster/zk/reconnect.py), so wait_for sees a restarted one.
            self._zk_client = KazooClient(hosts=self.zookeeper.connect_string_with_chroot(CHROOT), timeout=10,
                                          connection_retry=connection_retry(10))
            self._zk_client.start(timeout=30)
        return self._zk_client

    def state(self) -> ClusterState:
        from kazoo.exceptions import NoNodeError

        client = self._client()
        result = ClusterState()
        with contextlib.suppress(NoNodeError):
            result.brokers = {int(b) for b in client.get_children(layout.BROKER_IDS)}
        with contextlib.suppress(NoNodeError):
            result.controller = layout.decode_controller(client.get(layout.CONTROLLER)[0])
        with contextlib.suppress(NoNodeError):
            result.controller_epoch = layout.decode_controller_epoch(client.get(layout.CONTROLLER_EPOCH)[0])
        with contextlib.suppress(NoNodeError):
            for topic in client.get_children(layout.BROKER_TOPICS):
                try:
                    assignment = layout.TopicAssignment.decode(topic, client.get(layout.topic_path(topic))[0])
                except (NoNodeError, layout.LayoutError):
                    continue  # deleted, or being created
                for index, replicas in assignment.replicas.items():
                    result.replicas[(topic, index)] = replicas
                    path = layout.partition_state_path(topic, index)
                    try:
                        data, stat = client.get(path)
                    except NoNodeError:
                        continue
                    result.partitions[(topic, index)] = layout.PartitionState.decode(path, data, stat.version)
        return result

    def wait_for(self, predicate: Callable[[ClusterState], bool], timeout: float, what: str = "condition"
                 ) -> ClusterState:
        from kazoo.exceptions import ConnectionLoss, SessionExpiredError

        deadline = time.monotonic() + timeout
        state = None
        while True:
            try:
                state = self.state()
            except (ConnectionLoss, SessionExpiredError):
                pass  # our ZooKeeper client is moving to another node (one was cut off or killed): ask again
            else:
                if predicate(state):
                    return state
            if time.monotonic() > deadline:
                raise TimeoutError(f"cluster: {what} not reached within {timeout} s; last state {state}\n{self.logs()}")
            time.sleep(0.05)


@contextlib.contextmanager
def embedded_cluster(brokers: int = 3, base_dir: Path | None = None, **kwargs) -> Iterator[EmbeddedCluster]:
    """A started local cluster; stopped (every process) on exit."""
    with contextlib.ExitStack() as stack:
        if base_dir is None:
            base_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="eoslog-cluster-")))
        cluster = EmbeddedCluster(Path(base_dir), brokers, **kwargs)
        with cluster:
            yield cluster
