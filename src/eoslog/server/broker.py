"""The broker: lifecycle and wiring, nothing else. It builds the replica layer (a sole broker's replica
manager, or the cluster's when ``zookeeper.connect`` is set: cluster/service.py), registers the
coordinators with the coordinator runtime over it (coordinator/runtime.py), opens the partition registry
(cluster/registry.py), builds the frozen services every request handler gets (api/context.py), starts
the listener, then lets the coordinators load and the log cleaner start, and stops everything in the
right order.

Contract
- One asyncio event loop runs everything; ``start()`` returns once the listener accepts connections
  (the coordinators load what this broker leads in the background from then on).
- ``stop()`` is the clean shutdown: stop accepting, let in-flight work finish briefly, flush every log,
  write checkpoints, release the data-directory lock.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
import uuid
from pathlib import Path

from eoslog.cluster.registry import PartitionRegistry
from eoslog.cluster.topics import CONSUMER_OFFSETS, SHARE_GROUP_STATE, TRANSACTION_STATE, InternalTopic
from eoslog.log.checkpoint import write_atomically
from eoslog.log.config import LogConfig
from eoslog.log.data_dir_format import check_or_record
from eoslog.server.config import BrokerConfig, ConfigError
from eoslog.server.dispatcher import Dispatcher
from eoslog.server.group_settings import check_share_settings, group_settings
from eoslog.server.limits import ConnectionQuotas, MemoryPool
from eoslog.server.listeners import ListenerBindError, bind_host
from eoslog.server.network import KafkaConnection, close_idle
from eoslog.server.schema_validation import SchemaValidation

log = logging.getLogger(__name__)
# Test-only crash point (server/config.py TEST_CRASH_PROPERTIES; tests/share/test_share_txn_broker.py).
CRASH_AFTER_SHARE_STATE_MARKER = "eoslog.test.crash.after.share.state.marker"

META_PROPERTIES = "meta.properties"


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.dispatcher = Dispatcher()
        # What no client may exceed (server/limits.py); the pool's wake-ups are scheduled in start().
        self.request_memory = MemoryPool(config.request_memory_capacity)
        self.connection_quotas = ConnectionQuotas(config.max_connections, config.max_connections_per_ip,
                                                  config.max_connections_per_ip_overrides)
        # Listeners (server/listeners.py): the primary first; TLS contexts are built now so a bad
        # certificate or password is a configuration error before anything starts.
        self.listeners = config.listeners()
        self.inter_broker_listener = config.inter_broker_listener()
        self.link = None  # cluster mode: how this broker reaches the others (server/inter_broker.py)
        if config.cluster_mode:
            from eoslog.server.inter_broker import InterBrokerError, inter_broker_link

            try:
                self.link = inter_broker_link(self.inter_broker_listener, config.security_properties)
            except InterBrokerError as exc:
                raise ConfigError(str(exc)) from exc
        self._tls = {}
        self._sasl_mechanisms = {}  # listener name -> mechanisms, for SASL listeners
        # SCRAM credentials, set in start(): security/credentials.py CredentialStore (a file in the data
        # directory) on a single node, cluster/user_credentials.py ClusterCredentials (ZooKeeper) on a cluster.
        self.credentials = None
        # server/dynamic_broker_configs.py: kept in the data directory on a single node, in ZooKeeper on a
        # cluster (cluster/broker_configs_zk.py); where is chosen in start().
        self._zk_broker_configs = None
        for listener in self.listeners:
            if listener.protocol.startswith("SASL"):
                self._sasl_mechanisms[listener.name] = config.sasl_mechanisms(listener)
            if listener.uses_tls:
                from eoslog.server.tls import (
                    PrincipalMapper,
                    TlsConfigError,
                    listener_property,
                    server_context,
                )

                try:
                    self._tls[listener.name] = (server_context(config.security_properties, listener),
                                                PrincipalMapper.parse(listener_property(
                                                    config.security_properties, listener,
                                                    "ssl.principal.mapping.rules") or "DEFAULT"))
                except TlsConfigError as exc:
                    raise ConfigError(str(exc)) from exc
        self.bound_ports: dict[str, int] = {}
        self._extra_servers: list = []
        self.started_at_ms = 0
        self.cluster_id = ""
        self._server: asyncio.base_events.Server | None = None
        self._background: list[asyncio.Task] = []
        self.bound_port: int | None = None
        # coordinator/runtime.py: the group and transaction coordinators' shards, built on first need, and
        # coordinator/coordinators.py, how the handlers reach them; set in start() once the replica layer is.
        self.coordinator_runtime = None
        self.coordinators = None
        self.metadata = None  # cluster/metadata_cache.py: what clients are told of brokers and leaders
        self.replicas = None  # cluster/replica_manager.py: the cluster's, or a sole broker's own
        self.broker_clients = None  # cluster/broker_clients.py: connections to the other brokers
        self.producer_ids = None  # coordinator/transaction/producer_ids.py, opened in start()
        self.services = None  # api/context.py: what every request handler gets, built before serving
        self.log_cleaner = None  # log/cleaner.py, set in start() unless log.cleaner.enable=false
        self.cluster = None  # cluster/service.py in cluster mode (zookeeper.connect), else None
        self.metrics = None  # server/metrics.py MetricsEndpoint when eoslog.metrics.listen is set
        self.console = None  # server/console.py ConsoleEndpoint when eoslog.console.listen is set
        self.schema_registry = None  # server/schema_registry.py, when eoslog.schema.registry.listen is set
        # security/authorizer.py: the ACL authorizer when authorizer.class.name is set, else AllowAll.
        from eoslog.security.authorizer import Authorizer

        self.authorizer = Authorizer.from_config(config)
        default_log_properties = dict(config.log_defaults)
        try:
            LogConfig.from_properties(default_log_properties)
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
        # KIP-890 on the produce path (cluster/transaction_verification.py): every partition gets its check
        # when it is made; the coordinator behind it is bound when the coordinators are registered.
        from eoslog.cluster.transaction_verification import TransactionVerification

        self.transaction_verification = TransactionVerification()
        # Topics and partitions (cluster/registry.py): what the API handlers and coordinators use.
        self.registry = PartitionRegistry(config, default_log_properties,
                                          transaction_verifier=self.transaction_verification.check_append)
        self.schema_validation = SchemaValidation(self)  # the registry's record checks (confluent.*.schema.validation)
        from eoslog.server.dynamic_broker_configs import DynamicBrokerConfigs

        self.dynamic_configs = DynamicBrokerConfigs(config, self.connection_quotas,
                                                    self.registry.set_default_log_properties)
        # Share groups' settings checked now: a bad combination is a configuration error before anything
        # starts (the group coordinator that reads them is built on first use).
        check_share_settings(config)
        self.share_partitions = None  # share/manager.py: the share partitions led here, built on first use
        from eoslog.cluster.group_configs import GroupConfigs

        # cluster/group_configs.py: the GROUP config resource, kept like topic configs (a file or ZooKeeper)
        self.group_configs = GroupConfigs()

    # --- lifecycle --------------------------------------------------------------------------------
    async def start(self) -> None:
        started = time.monotonic()
        data_dir = Path(self.config.data_dir)
        loop = asyncio.get_running_loop()
        self.request_memory.schedule = loop.call_soon
        # Every listener is bound first and served only once ready: a port in use is refused before the
        # data directory is created, locked or read (nothing half-started), and on a cluster the
        # registration in ZooKeeper names the bound ports.
        await self._bind_listeners(start_serving=False)
        try:
            if self.config.metrics_listen is not None:
                self._start_metrics()
            if self.config.console_listen is not None:
                self._start_console()
            if self.config.schema_registry_listen is not None:
                self._start_schema_registry()
            # The format version before anything else in the directory is read (log/data_dir_format.py).
            check_or_record(data_dir)
            if self.config.cluster_mode:
                self.registry.open_log_directory(data_dir)
                await self._join_cluster(data_dir)
                from eoslog.cluster.broker_configs_zk import ClusterBrokerConfigs

                self._zk_broker_configs = ClusterBrokerConfigs(self.cluster.zk, self.config.node_id,
                                                               self.dynamic_configs.replace_levels)
                await self._zk_broker_configs.start()
                self.dynamic_configs.use_store(self._zk_broker_configs.write)
                await self.group_configs.use_zookeeper(self.cluster.zk)
            else:
                from eoslog.cluster.replica_manager import ReplicaManager, ReplicationConfig

                self._register_coordinators(ReplicaManager(ReplicationConfig(broker_id=self.config.node_id),
                                                           self.registry, None))
                self.registry.open_single_node(data_dir)
                self.cluster_id = self._load_or_create_cluster_id(data_dir)
                self.dynamic_configs.use_file(data_dir)
                self._use_group_config_file(data_dir)
        except BaseException:
            for server in [self._server, *self._extra_servers]:
                server.close()
            if self.metrics is not None:
                self.metrics.close()
            if self.console is not None:
                self.console.close()
            if self.schema_registry is not None:
                self.schema_registry.close()
            if getattr(self.registry, "log_directory", None) is not None:
                self.registry.log_directory.close()
            raise
        self._open_credentials(data_dir)
        self.registry.remove_orphan_logs()
        # Before any request is served: a broker that cannot read its ACLs must not start open.
        try:
            await self.authorizer.start(data_dir, self.cluster)
        except Exception as exc:
            from eoslog.security.acl_format import AclFormatError  # the ACL types: only where ACLs are kept

            if isinstance(exc, AclFormatError):
                raise ConfigError(f"cannot read the ACLs ({exc}); restore or remove them to start") from exc
            raise
        self._build_services()
        for server in [self._server, *self._extra_servers]:
            await server.start_serving()
        self.started_at_ms = int(time.time() * 1000)
        # The coordinators load what this broker leads now that it serves: a large __consumer_offsets
        # never delays the port (its groups answer COORDINATOR_LOAD_IN_PROGRESS meanwhile, and clients retry).
        self.coordinator_runtime.start()
        self._background.append(loop.create_task(self._housekeeping()))
        self._background.append(loop.create_task(self.registry.expire_producers(
            self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
            self.config.producer_id_expiration_ms)))
        self._background.append(loop.create_task(self._close_idle_connections()))
        # What the first requests need and opening the port did not (the codec, ApiVersions' and Metadata's
        # handlers: server/dispatcher.py), on the loop's first turn after the port is announced.
        loop.call_soon(self.dispatcher.warm_up)
        # Serving does not need the cleaner: its code (~10 ms of imports) loads on the loop's next turn, once
        # start() has returned and the port is announced; as a background task, a stop() that comes first
        # cancels it before it starts.
        self._background.append(loop.create_task(self._start_log_cleaner()))
        log.info(
            "eoslog broker %d (cluster %s) ready on %s:%d in %.0f ms; %d topics, %d partitions, data in %s",
            self.config.node_id, self.cluster_id, self.config.listen_host, self.bound_port,
            (time.monotonic() - started) * 1000, len(self.registry.topics.topics), len(self.registry.partitions),
            data_dir,
        )

    async def stop(self) -> None:
        log.info("shutting down: closing the listener and %d connections", len(self.dispatcher.connections))
        if self.metrics is not None:
            await self.metrics.stop()
        if self.console is not None:
            await self.console.stop()
        await self.schema_validation.stop()
        if self.schema_registry is not None:
            await self.schema_registry.stop()
        if self._server is not None:
            self._server.close()
        for server in self._extra_servers:
            server.close()
        for connection in list(self.dispatcher.connections):
            connection.close()
        await self.authorizer.stop()
        if self._zk_broker_configs is not None:
            await self._zk_broker_configs.stop()
        await self.group_configs.stop()
        if self.cluster is not None:
            # Stop leading first (waiting producers get NOT_LEADER_OR_FOLLOWER, nothing is acknowledged on
            # a guess), then leave: closing the session lets the controller move leadership at once.
            await self.cluster.stop()
        if self.log_cleaner is not None:
            await self.log_cleaner.stop()  # ends after its current batch; a half-cleaned group is discarded
        for task in self._background:
            task.cancel()
        for task in self._background:
            try:
                await task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
        if self.share_partitions is not None:
            await self.share_partitions.stop()
        if self.coordinator_runtime is not None:
            await self.coordinator_runtime.stop()
        if self.broker_clients is not None:
            self.broker_clients.close()
        await self.registry.close()
        log.info("shutdown complete: logs flushed, checkpoints written, data directory unlocked")

    def _load_or_create_cluster_id(self, data_dir: Path, adopt: str | None = None) -> str:
        existing = self._read_cluster_id(data_dir)
        if existing is not None:
            return existing
        cluster_id = adopt or self.config.cluster_id or uuid.uuid4().hex[:22]
        write_atomically(data_dir / META_PROPERTIES,
                         f"version=1\ncluster.id={cluster_id}\nnode.id={self.config.node_id}\n".encode())
        return cluster_id

    @staticmethod
    def _read_cluster_id(data_dir: Path) -> str | None:
        path = data_dir / META_PROPERTIES
        if path.exists():
            for line in path.read_text().splitlines():
                if line.startswith("cluster.id="):
                    return line.split("=", 1)[1].strip()
        return None

    # --- cluster mode -------------------------------------------------------------------------------
    async def _join_cluster(self, data_dir: Path) -> None:
        from eoslog.cluster.service import ClusterService
        from eoslog.cluster.zk.layout import BrokerRegistration, Endpoint

        registry = self.registry
        self.cluster = ClusterService(self.config, registry, self.link)
        registry.attach_cluster(self.cluster)
        self._register_coordinators(self.cluster.replicas)
        local = self._read_cluster_id(data_dir)
        proposed = local or self.config.cluster_id or uuid.uuid4().hex[:22]
        endpoints = tuple(Endpoint(listener.name, listener.protocol, *self.advertised_address(listener))
                          for listener in self.listeners)
        registration = BrokerRegistration(self.config.node_id, endpoints, self.config.broker_rack,
                                          str(data_dir.resolve()),
                                          clean_start=registry.log_directory.clean_shutdown)
        self.cluster_id = await self.cluster.start(proposed, registration) if local else \
            await self._start_adopting(proposed, registration)
        self._load_or_create_cluster_id(data_dir, adopt=self.cluster_id)

    async def _start_adopting(self, proposed: str, registration) -> str:
        """A new data directory joins whatever cluster ZooKeeper holds."""
        from eoslog.cluster.zk.client import ZooKeeper

        probe = ZooKeeper(self.config.zookeeper_connect, self.config.zookeeper_session_timeout_ms,
                          self.config.zookeeper_connection_timeout_ms)
        await asyncio.to_thread(probe.start)
        try:
            cluster_id = await asyncio.to_thread(probe.cluster_id, proposed)
        finally:
            await asyncio.to_thread(probe.stop)
        return await self.cluster.start(cluster_id, registration)

    # ---- coordinators ---------------------------------------------------------------------------------
    def _register_coordinators(self, replicas) -> None:
        """The coordinator runtime over the replica layer, with the group, transaction and share coordinators
        registered (groups first: a transaction's recovery may write markers to __consumer_offsets, which
        the groups must see on top of what they loaded). Before any partition is opened, so the runtime
        learns of every leadership."""
        from eoslog.cluster.broker_client import PLAINTEXT_LINK
        from eoslog.cluster.broker_clients import BrokerClients
        from eoslog.coordinator.runtime import CoordinatorRuntime
        from eoslog.coordinator.transaction.producer_ids import ProducerIds

        self.replicas = replicas
        self.registry.partition_listeners.append(replicas.partition_opened)
        self.broker_clients = BrokerClients(
            self.config.node_id, lambda: self.cluster.view.brokers if self.cluster is not None else {},
            self.link or PLAINTEXT_LINK)
        claim = None if self.cluster is None else self.cluster.zk.claim_producer_id_block
        try:
            self.producer_ids = ProducerIds(Path(self.config.data_dir), self.config.node_id, claim)
        except ValueError as exc:  # a damaged producer id block file: never risk handing out a used id
            raise ConfigError(str(exc)) from exc
        from eoslog.coordinator.coordinators import Coordinators

        runtime = self.coordinator_runtime = CoordinatorRuntime(self.registry, replicas)
        self.coordinators = Coordinators(runtime, self._transaction_markers_channel)
        config = self.config
        runtime.register(InternalTopic(CONSUMER_OFFSETS, config.offsets_topic_num_partitions,
                                       config.offsets_topic_replication_factor), self._group_shard)
        runtime.register(InternalTopic(TRANSACTION_STATE, config.transaction_state_log_num_partitions,
                                       config.transaction_state_log_replication_factor,
                                       min_insync_replicas=config.transaction_state_log_min_isr),
                         self._transaction_shard)
        # __share_group_state keeps snapshots and the updates since: compaction would keep one update per
        # share partition, and time must not delete a share partition's only snapshot. Records go only
        # when the share coordinator prunes what newer snapshots made redundant (coordinator/share/shard.py).
        runtime.register(InternalTopic(SHARE_GROUP_STATE, config.share_coordinator_state_topic_num_partitions,
                                       config.share_coordinator_state_topic_replication_factor,
                                       {"cleanup.policy": "delete", "retention.ms": "-1",
                                        "segment.bytes": str(config.share_coordinator_state_topic_segment_bytes)},
                                       min_insync_replicas=config.share_coordinator_state_topic_min_isr),
                         self._share_shard)

        def coordinator_of(transactional_id: str) -> int | None:
            from eoslog.protocol.coordinator_partition import partition_for

            index = partition_for(transactional_id, runtime.partition_count(TRANSACTION_STATE))
            leader = replicas.leader_of(TRANSACTION_STATE, index)
            return None if leader < 0 else leader

        if self.cluster is None:
            from eoslog.cluster.metadata_cache import SoleBrokerMetadataCache

            by_name = {listener.name: listener for listener in self.listeners}
            self.metadata = SoleBrokerMetadataCache(
                self.config.node_id, lambda name: self.advertised_address(by_name.get(name, self.listeners[0])))
        else:
            from eoslog.cluster.metadata_cache import ZkMetadataCache

            self.metadata = ZkMetadataCache(self.cluster, self.registry.request_internal_topic)
        self.transaction_verification.bind(
            lambda *args: runtime.shard(TRANSACTION_STATE).verify_partition_in_transaction(*args),
            self.broker_clients, coordinator_of)

    def _group_shard(self):
        """The group coordinator, telling the share-partition manager of departures and deleted groups."""
        from eoslog.coordinator.group.shard import GroupShard

        group_config, share_limits = group_settings(self.config)
        shard = GroupShard(self.coordinator_runtime, group_config, self._share_persister(),
                           group_configs=self.group_configs.get, share_limits=share_limits,
                           topic_deleted=self._topic_deleted)
        shard.share_listeners.append(_ShareListener(self))
        self.group_configs.listeners.append(shard.core.group_config_changed)
        return shard

    def _use_group_config_file(self, data_dir: Path) -> None:
        from eoslog.cluster.group_configs import GroupConfigError

        try:
            self.group_configs.use_file(data_dir)
        except GroupConfigError as exc:
            raise ConfigError(str(exc)) from exc

    def _share_partition_manager(self):  # the share partitions led here (server/share_wiring.py)
        from eoslog.server.share_wiring import share_partition_manager
        return share_partition_manager(self)

    def _share_persister(self):  # the share coordinator, in-process where it is this broker, else by RPC
        from eoslog.server.share_wiring import share_persister
        return share_persister(self)

    def _topic_deleted(self, topic_id) -> bool:
        """Whether the topic is surely gone, for the coordinators' clean-up of deleted topics' share state:
        only with the topics known and, on a cluster, none of them unreadable in ZooKeeper."""
        registry = self.registry
        if registry.topics is None or (self.cluster is not None and self.cluster.view.unreadable_topics):
            return False
        return topic_id not in registry.topics.by_id

    def _share_shard(self):
        """The share coordinator (KIP-932 share-partition state); a topic partition exists when the
        topic registry (this node's, or the cluster view) has it."""
        from eoslog.coordinator.share.config import ShareCoordinatorConfig
        from eoslog.coordinator.share.shard import ShareShard

        config, registry = self.config, self.registry

        def partition_exists(topic_id, partition: int) -> bool:
            info = registry.topics.by_id.get(topic_id) if registry.topics is not None else None
            return info is not None and 0 <= partition < info.partitions

        return ShareShard(self.coordinator_runtime, ShareCoordinatorConfig(
            snapshot_update_records_per_snapshot=config.share_coordinator_snapshot_update_records_per_snapshot,
            state_topic_prune_interval_ms=config.share_coordinator_state_topic_prune_interval_ms,
            cold_partition_snapshot_interval_ms=config.share_coordinator_cold_partition_snapshot_interval_ms,
        ), partition_exists, self._topic_deleted)

    def _transaction_shard(self):
        """The transaction coordinator with its extensions registered: transaction groups (guards the
        members of a group commit), check-back transactions and share partitions in transactions."""
        from eoslog.coordinator.check_back.extension import CheckBacks
        from eoslog.coordinator.share_transactions.extension import ShareTransactions
        from eoslog.coordinator.transaction.checkback import CheckPolicy
        from eoslog.coordinator.transaction.decisions import TransactionConfig
        from eoslog.coordinator.transaction.shard import TransactionShard, TransactionShardConfig
        from eoslog.coordinator.transaction_groups.extension import TransactionGroups

        config = self.config
        shard = TransactionShard(self.coordinator_runtime, TransactionShardConfig(
            core=TransactionConfig(
                transaction_max_timeout_ms=config.transaction_max_timeout_ms,
                transactional_id_expiration_ms=config.transactional_id_expiration_ms,
                offsets_topic_num_partitions=config.offsets_topic_num_partitions,
                check_policy=CheckPolicy(max_checks=config.transaction_check_max_checks,
                                         backoff_ms=config.transaction_check_backoff_ms,
                                         backoff_max_ms=config.transaction_check_backoff_max_ms),
                check_lease_ms=config.transaction_check_lease_ms),
            abort_timed_out_transaction_cleanup_interval_ms=(
                config.transaction_abort_timed_out_transaction_cleanup_interval_ms),
            test_faults=config.test_faults,
        ), self.producer_ids, self.coordinators.markers, self.registry.exists)
        shard.register(TransactionGroups(shard))
        shard.register(CheckBacks(shard))
        shard.register(ShareTransactions(shard, self._share_state_partitions))
        return shard

    def _share_state_partitions(self) -> int:
        runtime = self.coordinator_runtime
        runtime.ensure_topic(SHARE_GROUP_STATE)
        return runtime.partition_count(SHARE_GROUP_STATE)

    def _transaction_markers_channel(self):
        """coordinator/transaction/markers.py: the coordinator's markers and the WriteTxnMarkers API's."""
        from eoslog.coordinator.transaction.markers import TransactionMarkerChannel

        markers = TransactionMarkerChannel(self.config.node_id, self.registry, self.replicas, self.broker_clients,
                                           lambda: self.coordinator_runtime.ensure_topic(CONSUMER_OFFSETS))

        def offsets_marker(partition: int, producer_id: int, committed: bool) -> None:
            # A marker on a __consumer_offsets partition whose groups are not loaded yet is read with the
            # rest of that partition's log when it loads.
            groups = self.coordinator_runtime.built(CONSUMER_OFFSETS)
            if groups is not None:
                groups.on_txn_marker(partition, producer_id, committed)

        def share_state_marker(partition: int, producer_id: int, producer_epoch: int, committed: bool) -> None:
            # Issue 37 step 6: the share coordinator decides the producer's pending acknowledgements there and
            # the share partitions led here apply the outcome at once; leaders elsewhere poll for it.
            if self.config.test_faults.get(CRASH_AFTER_SHARE_STATE_MARKER):
                log.error("test fault %s: killing the broker after a marker of producer %d on %s-%d",
                          CRASH_AFTER_SHARE_STATE_MARKER, producer_id, SHARE_GROUP_STATE, partition)
                os.kill(os.getpid(), signal.SIGKILL)
            shares = self.coordinator_runtime.built(SHARE_GROUP_STATE)
            if shares is not None:
                decided = shares.on_txn_marker(partition, producer_id, producer_epoch, committed)
                if decided and self.share_partitions is not None:
                    self.share_partitions.transactions_decided(decided)

        markers.offsets_marker_listeners.append(offsets_marker)
        markers.share_state_marker_listeners.append(share_state_marker)
        return markers

    def _build_services(self) -> None:
        """The frozen services every request handler gets (api/context.py): built once, before serving."""
        from eoslog.api.context import BrokerServices
        from eoslog.cluster.partition_offsets import PartitionOffsets
        from eoslog.server.broker_config_resource import BrokerConfigResource

        self.services = self.dispatcher.services = BrokerServices(
            node_id=self.config.node_id, cluster_id=self.cluster_id, registry=self.registry,
            replicas=self.replicas, metadata=self.metadata, coordinators=self.coordinators,
            transaction_verification=self.transaction_verification, authorizer=self.authorizer,
            credentials=self.credentials,
            broker_configs=BrokerConfigResource(self.config, self.dynamic_configs, self.cluster_id),
            primary_listener=self.listeners[0].name, share_partitions=self._shares,
            group_configs=self.group_configs, partition_offsets=PartitionOffsets(self.replicas, self.broker_clients))
        self.dispatcher.close_listeners.append(self._connection_closed)

    def _shares(self):
        """The share-partition manager, built on the first share request."""
        if self.share_partitions is None:
            self.share_partitions = self._share_partition_manager()
        return self.share_partitions

    def _connection_closed(self, connection) -> None:
        if self.share_partitions is not None:
            self.share_partitions.connection_closed(str(id(connection)))  # its share session ends

    async def _bind_listeners(self, start_serving: bool) -> None:
        """Binds every listener, the primary first; a port of 0 becomes the one the system picked. An
        address that cannot be bound is a ListenerBindError, with the listeners bound so far closed."""
        for listener in self.listeners:
            try:
                server = await self._listen(listener, start_serving=start_serving)
            except OSError as exc:
                for bound in filter(None, [self._server, *self._extra_servers]):
                    bound.close()
                self._server, self._extra_servers = None, []
                primary = listener is self.listeners[0]
                raise ListenerBindError.from_os_error(
                    listener, "--listen HOST:PORT" if primary else f"port for {listener.name} in listeners=",
                    exc) from exc
            port = server.sockets[0].getsockname()[1]
            self.bound_ports[listener.name] = port
            if listener is self.listeners[0]:
                self._server, self.bound_port = server, port
                if not self.config.listen_port:
                    self.config.listen_port = port
            else:
                self._extra_servers.append(server)
                log.info("listener %s (%s) on %s:%d", listener.name, listener.protocol, listener.host, port)

    async def _listen(self, listener, start_serving: bool = True):
        tls = self._tls.get(listener.name)
        # A client that never finishes its TLS handshake is dropped by the same deadline as one that never
        # finishes SASL (eoslog.authentication.timeout.ms).
        extra = {"ssl": tls[0], "ssl_handshake_timeout": self.config.authentication_timeout_ms / 1000} if tls else {}
        return await asyncio.get_running_loop().create_server(
            lambda: self._new_connection(listener), bind_host(listener.host), listener.port, reuse_address=True,
            backlog=self.config.socket_listen_backlog_size, start_serving=start_serving, **extra)

    def _new_connection(self, listener) -> KafkaConnection:
        tls = self._tls.get(listener.name)
        mechanisms = self._sasl_mechanisms.get(listener.name)
        sasl = None
        if mechanisms is not None:
            from eoslog.security.sasl import SaslSession

            sasl = SaslSession(mechanisms, self.credentials.lookup)
        return KafkaConnection(self.dispatcher, self.config.socket_request_max_bytes, self.request_memory,
                               self.connection_quotas, listener=listener,
                               principal_mapper=tls[1] if tls else None, sasl=sasl,
                               authentication_timeout_s=self.config.authentication_timeout_ms / 1000,
                               unauthenticated_max_request_bytes=self.config.sasl_server_max_receive_size,
                               reauth_ms=self.config.connections_max_reauth_ms)

    def _open_credentials(self, data_dir: Path) -> None:
        """SCRAM credentials: ZooKeeper's /config/users on a cluster (read while joining), a file in the
        data directory on a single node."""
        if self.cluster is not None:
            self.credentials = self.cluster.users
            where = f"--zookeeper {self.config.zookeeper_connect}"
        else:
            from eoslog.security.credentials import CredentialStore

            try:
                self.credentials = CredentialStore.open(data_dir)
            except ValueError as exc:
                from eoslog.security.scram import CredentialError  # loaded only with a credentials file

                if isinstance(exc, CredentialError):
                    raise ConfigError(str(exc)) from exc
                raise
            where = f"--data-dir {data_dir}"
        if self._sasl_mechanisms and not self.credentials.users():
            log.warning("SASL listeners are configured but no user has a credential: create the first with "
                        "`eoslog users add NAME %s` (docs/security.md)", where)

    def advertised_address(self, listener) -> tuple[str, int]:
        """Where clients of ``listener`` are told to connect (on a cluster, what ZooKeeper registers)."""
        if listener is self.listeners[0]:
            return self.config.advertised
        return listener.advertised(self.bound_ports.get(listener.name))

    def listener_name_of(self, connection) -> str:
        """The listener a client came in on; a cluster answers with every broker's endpoint of that name."""
        listener = getattr(connection, "listener", None)
        return (listener if listener is not None else self.listeners[0]).name

    async def _close_idle_connections(self) -> None:
        """connections.max.idle.ms, checked a few times per period (Kafka checks on every poll)."""
        max_idle_s = self.config.connections_max_idle_ms / 1000
        while True:
            await asyncio.sleep(min(max_idle_s / 4, 30.0))
            close_idle(self.dispatcher.connections, max_idle_s)

    async def _housekeeping(self) -> None:
        """Flushes due by flush.messages / flush.ms, retention, deferred file deletion and checkpoints,
        each on Kafka's schedule (the log directory owns the details)."""
        await self.registry.log_directory.run_maintenance(
            retention_check_interval_ms=self.config.log_retention_check_interval_ms
        )

    def _start_metrics(self) -> None:
        """Right after the listeners are bound (a taken port is an error before the data directory is
        touched) and before any request is served, so every request is counted; the collector copes with
        coordinators that are not there yet."""
        from eoslog.server.metrics import MetricsEndpoint

        host, port = self.config.metrics_listen
        self.metrics = MetricsEndpoint(self, host, port)
        try:
            self.metrics.start()
        except OSError as exc:
            raise ListenerBindError.for_address(host, port, "--metrics-listen HOST:PORT (eoslog.metrics.listen)", exc) from exc

    def _start_console(self) -> None:
        """Like the metrics endpoint: its port bound before the data directory is touched. The console
        connects to this broker's listener lazily, on its first page (server/console.py)."""
        from eoslog.server.console import ConsoleEndpoint

        self.console = ConsoleEndpoint(self.config)
        self.console.start(self.listeners, self.bound_ports)

    def _start_schema_registry(self) -> None:
        """Like the console: its port bound before the data directory is touched; the registry itself
        starts in the background once this broker serves (server/schema_registry.py)."""
        from eoslog.server.schema_registry import SchemaRegistryEndpoint

        self.schema_registry = SchemaRegistryEndpoint(self.config)
        self.schema_registry.start(self.listeners, self.bound_ports)
        if self.console is not None:  # the console's schema pages show this registry
            tls = self.schema_registry.tls
            self.console.use_schema_registry(self.schema_registry.local_url(), tls.client if tls else None)

    async def _start_log_cleaner(self) -> None:
        """Compaction of every cleanup.policy=compact log (internal topics included), as a background task:
        planning and swaps on this loop, the CPU-heavy rewriting in a child process (log.cleaner.process)."""
        if not self.config.log_cleaner_enable:
            return
        from eoslog.log.cleaner import CleanerTarget, LogCleaner

        def targets() -> list[CleanerTarget]:
            return [CleanerTarget.for_partition(p) for p in self.registry.partitions.values() if p.log.config.compacts]

        self.log_cleaner = LogCleaner(
            self.registry.log_directory.data_dir,
            targets,
            backoff_ms=self.config.log_cleaner_backoff_ms,
            map_budget=self.config.log_cleaner_dedupe_buffer_size,
            process=self.config.log_cleaner_process,
        )
        self.log_cleaner.start()


class _ShareListener:
    """What the group coordinator tells the share-partition manager (built after it, in _build_services)."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def member_left(self, group_id: str, member_id: str) -> None:
        if self._broker.share_partitions is not None:
            self._broker.share_partitions.member_left(group_id, member_id)

    def group_deleted(self, group_id: str) -> None:
        if self._broker.share_partitions is not None:
            self._broker.share_partitions.group_deleted(group_id)
