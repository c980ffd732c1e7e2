"""The broker: opens the data directory, owns topics, partitions and coordinators, serves connections.

Contract
- One asyncio event loop runs everything; ``start()`` returns once the listener accepts connections.
- ``stop()`` is the clean shutdown: stop accepting, let in-flight work finish briefly, flush every log,
  write checkpoints, release the data-directory lock.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from pathlib import Path
from typing import Any

from eoslog.cluster.partition import Partition
from eoslog.cluster.topic_configs import check_names
from eoslog.cluster.topics import (
    CONSUMER_OFFSETS,
    TRANSACTION_STATE,
    TopicInfo,
    TopicRegistry,
    write_atomically,
)
from eoslog.log.config import LogConfig
from eoslog.log.manager import LogDirectory
from eoslog.protocol.errors import (
    CoordinatorNotAvailableError,
    InvalidConfigError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from eoslog.server.config import BrokerConfig, ConfigError
from eoslog.server.dispatcher import Dispatcher
from eoslog.server.network import KafkaConnection

log = logging.getLogger(__name__)

META_PROPERTIES = "meta.properties"
# Kafka's defaults for its internal topics: compacted, and never deleted by time.
INTERNAL_TOPIC_CONFIGS = {"cleanup.policy": "compact", "retention.ms": "-1", "segment.bytes": str(100 * 1024 * 1024)}


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.dispatcher = Dispatcher(self)
        self.started_at_ms = 0
        self.cluster_id = ""
        self._server: asyncio.base_events.Server | None = None
        self._background: list[asyncio.Task] = []
        self.bound_port: int | None = None
        self.log_directory: LogDirectory | None = None
        self.topics: TopicRegistry | None = None
        self.transaction_coordinator = None  # coordinator/transaction/coordinator.py, set in start()
        self.group_service = None  # coordinator/group/service.py, set in start()
        self.log_cleaner = None  # log/cleaner.py, set in start() unless log.cleaner.enable=false
        self.cluster = None  # cluster/service.py in cluster mode (zookeeper.connect), else None
        self._coordinators_started = False
        self._creating: set[str] = set()
        self.default_log_properties = dict(config.log_defaults)
        try:
            LogConfig.from_properties(self.default_log_properties)
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc

    # --- lifecycle --------------------------------------------------------------------------------
    async def start(self) -> None:
        started = time.monotonic()
        data_dir = Path(self.config.data_dir)
        data_dir.mkdir(parents=True, exist_ok=True)
        loop = asyncio.get_running_loop()
        if self.config.cluster_mode:
            # Bound now (the registration in ZooKeeper names the port), served only once ready.
            self._server = await loop.create_server(
                lambda: KafkaConnection(self.dispatcher, self.config.socket_request_max_bytes),
                self.config.listen_host, self.config.listen_port, reuse_address=True, start_serving=False)
            self.bound_port = self._server.sockets[0].getsockname()[1]
            if not self.config.listen_port:
                self.config.listen_port = self.bound_port
            self.log_directory = LogDirectory.open(str(data_dir), config_for=self._log_config_for_topic)
            try:
                await self._join_cluster(data_dir)
            except BaseException:
                self._server.close()
                self.log_directory.close()
                raise
        else:
            self.topics = TopicRegistry(data_dir)
            self.log_directory = LogDirectory.open(str(data_dir), config_for=self._log_config_for_topic)
            self.cluster_id = self._load_or_create_cluster_id(data_dir)
            for info in self.topics.topics.values():
                self._open_partitions(info, range(info.partitions))
        self._remove_orphan_logs()
        from eoslog.coordinator.transaction.coordinator import TransactionCoordinator

        self.transaction_coordinator = TransactionCoordinator(self)
        from eoslog.coordinator.group.service import GroupService

        # Groups load first: the transaction coordinator's recovery may write markers to
        # __consumer_offsets, which the group service must see on top of what it loaded.
        self.group_service = GroupService(self)
        await self.group_service.start()
        await self.transaction_coordinator.start()
        self._coordinators_started = True
        if self._server is not None:
            await self._server.start_serving()
        else:
            self._server = await loop.create_server(
                lambda: KafkaConnection(self.dispatcher, self.config.socket_request_max_bytes),
                self.config.listen_host,
                self.config.listen_port,
                reuse_address=True,
            )
        self.bound_port = self._server.sockets[0].getsockname()[1]
        if not self.config.listen_port:
            self.config.listen_port = self.bound_port
        self.started_at_ms = int(time.time() * 1000)
        self._background.append(loop.create_task(self._housekeeping()))
        self._start_log_cleaner()
        log.info(
            "eoslog broker %d (cluster %s) ready on %s:%d in %.0f ms; %d topics, %d partitions, data in %s",
            self.config.node_id, self.cluster_id, self.config.listen_host, self.bound_port,
            (time.monotonic() - started) * 1000, len(self.topics.topics), len(self.partitions), data_dir,
        )

    async def stop(self) -> None:
        log.info("shutting down: closing the listener and %d connections", len(self.dispatcher.connections))
        if self._server is not None:
            self._server.close()
        for connection in list(self.dispatcher.connections):
            connection.close()
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
        if self.transaction_coordinator is not None:
            await self.transaction_coordinator.stop()
        if self.group_service is not None:
            await self.group_service.stop()
        for partition in self.partitions.values():
            await partition.close()
        if self.log_directory is not None:
            self.log_directory.close()
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
        from eoslog.cluster.cluster_topics import ClusterTopics
        from eoslog.cluster.service import ClusterService
        from eoslog.cluster.zk.layout import BrokerRegistration

        self.cluster = ClusterService(self.config, self.partitions, self._open_replica, self._remove_replica)
        self.topics = ClusterTopics(self.cluster)
        self.cluster.replicas.min_isr_for = self._min_insync_replicas
        self.cluster.replicas.on_became_leader.append(self._on_became_leader)
        self.cluster.view_listeners.append(self._apply_topic_configs)
        local = self._read_cluster_id(data_dir)
        proposed = local or self.config.cluster_id or uuid.uuid4().hex[:22]
        host, port = self.config.advertised
        registration = BrokerRegistration(self.config.node_id, host, port, self.config.broker_rack,
                                          str(data_dir.resolve()))
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

    def _open_replica(self, topic: str, index: int) -> Partition:
        info = self.topics.get(topic)
        config = self.log_config_for(info) if info is not None else LogConfig.from_properties(self.default_log_properties)
        partition_log = self.log_directory.get_or_create_log(topic, index, config)
        partition_log.config = config
        partition = Partition(topic, index, partition_log, self.log_directory.group_commit)
        partition.writable = False  # until the controller makes this replica the leader
        if self.transaction_coordinator is not None:
            self.transaction_coordinator.attach_partition(partition)
        self.partitions[(topic, index)] = partition
        return partition

    def _remove_replica(self, topic: str, index: int) -> None:
        partition = self.partitions.pop((topic, index), None)
        if partition is not None:
            partition.wake_fetchers()
        self.log_directory.delete_log(topic, index)
        log.info("removed the local replica of %s-%d: the cluster no longer places it here", topic, index)

    def _apply_topic_configs(self, view) -> None:
        for (topic, index), partition in self.partitions.items():
            info = self.topics.get(topic)
            if info is None:
                continue
            try:
                config = self.log_config_for(info)
            except (ValueError, ConfigError):
                log.exception("ignoring the invalid configs of topic %s in ZooKeeper", topic)
                continue
            if config != partition.log.config:
                partition.log.config = config

    def _min_insync_replicas(self, topic: str) -> int:
        info = self.topics.get(topic)
        value = info.configs.get("min.insync.replicas") if info is not None else None
        if value is None and topic == TRANSACTION_STATE:
            return self.config.transaction_state_log_min_isr
        return int(value) if value is not None else self.config.min_insync_replicas

    def _on_became_leader(self, topic: str, index: int) -> None:
        """A coordinator partition led here now: its coordinator loads it (moving coordinators with
        everything in flight is the next step of the cluster work; see docs/cluster.md)."""
        if not self._coordinators_started:
            return
        if topic == CONSUMER_OFFSETS:
            self.group_service.load_partition(index)
        elif topic == TRANSACTION_STATE:
            self.transaction_coordinator.load_partition(index)

    def coordinator_partitions(self, topic: str, count: int) -> list[int]:
        """The partitions of an internal topic whose coordinator runs here: all of them on a single node,
        the ones this broker leads in a cluster."""
        if self.cluster is None:
            return list(range(count))
        return [i for i in range(count) if self.cluster.replicas.is_leader(topic, i)]

    def leader_partition(self, topic: str, index: int) -> Partition:
        """The partition for a client's produce or fetch: only its leader serves it."""
        if self.cluster is None:
            return self.partition(topic, index)
        return self.cluster.replicas.leader_partition(topic, index)

    async def _housekeeping(self) -> None:
        """Flushes due by flush.messages / flush.ms, retention, deferred file deletion and checkpoints,
        each on Kafka's schedule (the log directory owns the details)."""
        await self.log_directory.run_maintenance(
            retention_check_interval_ms=self.config.log_retention_check_interval_ms
        )

    def _start_log_cleaner(self) -> None:
        """Compaction of every cleanup.policy=compact log (internal topics included), as a background task:
        planning and swaps on this loop, the CPU-heavy rewriting in the cleaner's own worker thread."""
        if not self.config.log_cleaner_enable:
            return
        from eoslog.log.cleaner import CleanerTarget, LogCleaner

        def targets() -> list[CleanerTarget]:
            return [CleanerTarget.for_partition(p) for p in self.partitions.values() if p.log.config.compacts]

        self.log_cleaner = LogCleaner(
            self.log_directory.data_dir,
            targets,
            backoff_ms=self.config.log_cleaner_backoff_ms,
            map_budget=self.config.log_cleaner_dedupe_buffer_size,
        )
        self.log_cleaner.start()

    # --- topics and partitions --------------------------------------------------------------------
    def _log_config_for_topic(self, topic: str) -> LogConfig:
        info = self.topics.get(topic) if self.topics is not None else None
        if info is None:  # an orphan directory about to be removed
            return LogConfig.from_properties(self.default_log_properties)
        return self.log_config_for(info)

    def log_config_for(self, info: TopicInfo) -> LogConfig:
        properties = dict(self.default_log_properties)
        if info.is_internal:
            properties.update(INTERNAL_TOPIC_CONFIGS)
        properties.update(info.configs)
        return LogConfig.from_properties(properties)

    def _open_partitions(self, info: TopicInfo, indexes: range) -> None:
        config = self.log_config_for(info)
        for index in indexes:
            partition_log = self.log_directory.get_or_create_log(info.name, index, config)
            partition = Partition(info.name, index, partition_log, self.log_directory.group_commit)
            if self.transaction_coordinator is not None:
                self.transaction_coordinator.attach_partition(partition)
            self.partitions[(info.name, index)] = partition

    def _remove_orphan_logs(self) -> None:
        """Partition directories of topics the registry no longer has (a crash during a delete); in a
        cluster, replicas the assignment no longer places here."""
        for topic, index in list(self.log_directory.logs):
            if self.cluster is not None:
                if (topic, index) not in self.partitions and topic not in self.cluster.view.unreadable_topics:
                    log.info("removing %s-%d: the cluster does not place it on this broker", topic, index)
                    self.log_directory.delete_log(topic, index)
                continue
            info = self.topics.get(topic)
            if info is None or index >= info.partitions:
                log.info("removing %s-%d: its topic was deleted", topic, index)
                self.log_directory.delete_log(topic, index)

    def partition(self, topic: str, index: int) -> Partition:
        partition = self.partitions.get((topic, index))
        if partition is None:
            raise UnknownTopicOrPartitionError(f"{topic}-{index} does not exist on this broker")
        return partition

    def check_topic_configs(self, configs: dict[str, str]) -> None:
        try:
            LogConfig.from_properties({**self.default_log_properties, **configs})
        except ValueError as exc:
            raise InvalidConfigError(str(exc)) from exc

    def create_topic(self, name: str, partitions: int | None, configs: dict[str, str] | None = None,
                     validate_only: bool = False) -> TopicInfo:
        count = self.config.num_partitions if partitions is None or partitions == -1 else partitions
        configs = dict(configs or {})
        check_names(configs)
        try:
            LogConfig.from_properties({**self.default_log_properties, **configs})
        except ValueError as exc:
            raise InvalidConfigError(str(exc)) from exc
        if validate_only:
            from eoslog.cluster.topics import validate_topic_name

            validate_topic_name(name)
            return TopicInfo(name, uuid.UUID(int=0), count, configs)
        info = self.topics.create(name, count, configs)
        self._open_partitions(info, range(count))
        log.info("created topic %s with %d partitions", name, count)
        return info

    def ensure_internal_topic(self, name: str) -> TopicInfo:
        info = self.topics.get(name)
        if info is not None:
            return info
        count = (self.config.offsets_topic_num_partitions if name == CONSUMER_OFFSETS
                 else self.config.transaction_state_log_num_partitions)
        assert name in (CONSUMER_OFFSETS, TRANSACTION_STATE)
        if self.cluster is not None:
            self.request_internal_topic(name)
            raise CoordinatorNotAvailableError(f"{name} is being created")
        return self.create_topic(name, count)

    def request_internal_topic(self, name: str) -> None:
        """Cluster mode: creates an internal topic in the background (Kafka's replication factor rule: as
        many live brokers as offsets.topic.replication.factor / transaction.state.log.replication.factor,
        or the topic waits)."""
        if name in self._creating:
            return
        if name == CONSUMER_OFFSETS:
            count, factor = self.config.offsets_topic_num_partitions, self.config.offsets_topic_replication_factor
            configs = dict(INTERNAL_TOPIC_CONFIGS)
        else:
            count = self.config.transaction_state_log_num_partitions
            factor = self.config.transaction_state_log_replication_factor
            configs = {**INTERNAL_TOPIC_CONFIGS, "min.insync.replicas": str(self.config.transaction_state_log_min_isr)}
        live = len(self.cluster.view.brokers)
        if live < factor:
            log.warning("cannot create %s yet: replication factor %d needs %d live brokers, %d are registered",
                        name, factor, factor, live)
            return

        async def create() -> None:
            try:
                replicas = self.topics.plan_assignment(count, factor)
                await self.topics.create(name, replicas, configs, timeout_s=30)
            except TopicAlreadyExistsError:
                pass
            except Exception:
                log.exception("creating %s failed", name)
            finally:
                self._creating.discard(name)

        self._creating.add(name)
        asyncio.get_running_loop().create_task(create())

    def request_topic_creation(self, name: str) -> None:
        """Cluster mode: Metadata's auto-creation, in the background (the client sees
        LEADER_NOT_AVAILABLE and asks again, as with Kafka)."""
        if name in self._creating:
            return

        async def create() -> None:
            try:
                replicas = self.topics.plan_assignment(self.config.num_partitions, self.config.default_replication_factor)
                await self.topics.create(name, replicas, {}, timeout_s=30)
            except TopicAlreadyExistsError:
                pass
            except Exception:
                log.exception("auto-creating topic %s failed", name)
            finally:
                self._creating.discard(name)

        self._creating.add(name)
        asyncio.get_running_loop().create_task(create())

    def delete_topic(self, name: str) -> TopicInfo:
        info = self.topics.delete(name)
        for index in range(info.partitions):
            partition = self.partitions.pop((name, index), None)
            if partition is not None:
                partition.wake_fetchers()
            self.log_directory.delete_log(name, index)
        log.info("deleted topic %s", name)
        return info

    def create_partitions(self, name: str, count: int) -> TopicInfo:
        info = self.topics.require(name)
        old = info.partitions
        self.topics.set_partitions(name, count)
        self._open_partitions(info, range(old, count))
        log.info("topic %s grew from %d to %d partitions", name, old, count)
        return info

    def alter_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        info = self.topics.require(name)
        try:
            config = LogConfig.from_properties({**self.default_log_properties, **configs})
        except ValueError as exc:
            raise InvalidConfigError(str(exc)) from exc
        self.topics.set_configs(name, configs)
        for index in range(info.partitions):
            self.partition(name, index).log.config = config

    def topic_ids(self) -> dict[str, Any]:
        return {name: info.topic_id for name, info in self.topics.topics.items()}
