"""The partitions this broker holds, and the topics they belong to: one registry that the API handlers
and the coordinators use, on a single node and in a cluster alike.

Contract
- Owns the map of local partition replicas and the topic registry: ``topics.json`` on a single node
  (cluster/topics.py), ZooKeeper through the cluster view in cluster mode (cluster/cluster_topics.py).
- ``partition()`` is the local replica whatever its role (coordinators load and append through it; a
  replica that is not the leader refuses appends itself); what a client's produce or fetch may use is
  the replica manager's ``leader_partition()`` (cluster/replica_manager.py).
- Topic changes are prepare -> log -> apply. A new topic or partition on a single node: its files are made
  first (in a worker thread, unserved), then topics.json names it, then its partitions are served; a
  crash in between leaves directories that the next start removes. A deleted topic: topics.json first,
  then the logs. In a cluster ZooKeeper is written first, and each broker applies what it says.
- Only the broker's event-loop thread calls it; its single-node CreateTopics, CreatePartitions and
  DeleteTopics run one at a time and hand their file work to a worker thread (LogDirectory.make_logs,
  remove_detached), so 1,000 partitions do not stop the loop. It knows nothing of the network or server/.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eoslog.cluster.topic_configs import INTERNAL_TOPIC_CONFIGS, check_names, check_values
from eoslog.cluster.topics import (
    InternalTopic,
    TopicInfo,
    TopicRegistry,
    validate_topic_name,
)
from eoslog.log.config import LogConfig
from eoslog.log.manager import LogDirectory
from eoslog.protocol.errors import (
    CoordinatorNotAvailableError,
    InvalidConfigError,
    InvalidPartitionsError,
    LeaderNotAvailableError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)

if TYPE_CHECKING:
    from eoslog.cluster.partition import Partition
    from eoslog.cluster.service import ClusterService
    from eoslog.log.log import Log
    from eoslog.log.record_validation import RecordCheck

log = logging.getLogger(__name__)


class PartitionRegistry:
    def __init__(self, config: Any, default_log_properties: dict[str, str],
                 transaction_verifier: Callable[[str | None, int, int, str, int], None] | None = None) -> None:
        self.config = config  # the broker's settings (server/config.py BrokerConfig), read only
        # KIP-890 part 1: given to every partition made here, which asks it about each transactional
        # batch (cluster/transaction_verification.py); None: batches are not checked (tests of the log).
        self.transaction_verifier = transaction_verifier
        self.default_log_properties = default_log_properties
        self.default_log_sources: dict[str, int] = {}  # topic config -> DescribeConfigs source, for dynamic ones
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.topics: Any = None  # TopicRegistry, or ClusterTopics in cluster mode
        self.log_directory: LogDirectory | None = None
        self.cluster: ClusterService | None = None
        # Called with every partition opened (a sole broker's replica manager makes it leader).
        # Internal topics by name (cluster/topics.py InternalTopic), created on first use.
        self.internal_topics: dict[str, InternalTopic] = {}
        self.partition_listeners: list[Callable[[Partition], None]] = []
        # (topic, its configs) -> the RecordChecks its partitions apply to client batches (Partition.record_checks),
        # asked whenever a partition opens or its topic's configs change: the broker's schema id validation
        # (server/schema_validation.py). None: no checks.
        self.record_checks_for: Callable[[str, dict[str, str]], tuple[RecordCheck, ...]] | None = None
        self._creating: set[str] = set()
        # Single node: CreateTopics, DeleteTopics and CreatePartitions one at a time (each awaits a worker
        # thread for its files), and the names whose files are being made.
        self._topic_changes = asyncio.Lock()
        self._pending_topics: set[str] = set()
        self._removals: set[asyncio.Task] = set()  # cluster mode: replicas' directories being removed
        self._admin = None  # the admin property's, made on first use

    @property
    def admin(self):
        """What the admin APIs call (CreateTopics, DeleteTopics, ...): cluster/admin.py, with the elections
        and ZooKeeper's layout it imports, loads at the first admin request, not before the port opens."""
        if self._admin is None:
            from eoslog.cluster.admin import TopicAdmin

            self._admin = TopicAdmin(self)
        return self._admin

    # ---- opening -------------------------------------------------------------------------------------

    def open_single_node(self, data_dir: Path) -> None:
        self.topics = TopicRegistry(data_dir)
        self.log_directory = LogDirectory.open(str(data_dir), config_for=self.log_config_for_topic,
                                              syncfs=self.config.log_flush_syncfs)
        for info in self.topics.topics.values():
            self.open_partitions(info, range(info.partitions))

    def open_log_directory(self, data_dir: Path) -> None:
        """Cluster mode: the logs first; which of them are replicas here the cluster view says. Every
        segment is CRC-checked: a damaged batch of a follower is fetched again (docs/durability.md,
        "Corruption")."""
        self.log_directory = LogDirectory.open(str(data_dir), config_for=self.log_config_for_topic,
                                              syncfs=self.config.log_flush_syncfs, scrub=True)

    def attach_cluster(self, cluster: ClusterService) -> None:
        from eoslog.cluster.cluster_topics import ClusterTopics

        self.cluster = cluster
        self.topics = ClusterTopics(cluster)
        cluster.replicas.min_isr_for = self.min_insync_replicas
        cluster.view_listeners.append(self.apply_topic_configs)

    def _partition(self, topic: str, index: int, partition_log: Log, writable: bool = True) -> Partition:
        # Imported with the first partition: a broker with none yet opens its port without the partition,
        # producer-state and record code (its warm-up loads it right after: server/dispatcher.py).
        from eoslog.cluster.partition import Partition

        return Partition(topic, index, partition_log, self.log_directory.group_commit,
                         transaction_verifier=self.transaction_verifier, writable=writable)

    def _record_checks(self, topic: str) -> tuple[RecordCheck, ...]:
        if self.record_checks_for is None:
            return ()
        info = self.topics.get(topic) if self.topics is not None else None
        return self.record_checks_for(topic, dict(info.configs) if info is not None else {})

    def _opened(self, partition: Partition) -> None:
        partition.record_checks = self._record_checks(partition.topic)
        for listener in self.partition_listeners:
            listener(partition)
        self.partitions[(partition.topic, partition.index)] = partition

    async def close(self) -> None:
        if self._removals:
            await asyncio.gather(*self._removals, return_exceptions=True)
        for partition in self.partitions.values():
            await partition.close()
        if self.log_directory is not None:
            self.log_directory.close()

    # ---- topics and partitions -----------------------------------------------------------------------

    def log_config_for_topic(self, topic: str) -> LogConfig:
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

    def open_partitions(self, info: TopicInfo, indexes: range) -> None:
        config = self.log_config_for(info)
        for index in indexes:
            partition_log = self.log_directory.get_or_create_log(info.name, index, config)
            self._opened(self._partition(info.name, index, partition_log))

    def remove_orphan_logs(self) -> None:
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

    def exists(self, topic: str, index: int) -> bool:
        """Whether the partition exists anywhere: a replica here, or (on a cluster) a partition of a topic
        ZooKeeper knows, wherever its replicas are. What a coordinator checks before naming a partition
        in a transaction: with RF below the broker count most partitions have no replica here."""
        if (topic, index) in self.partitions:
            return True
        info = self.topics.get(topic) if self.topics is not None else None
        return info is not None and 0 <= index < info.partitions

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
        check_values(configs)

    def create_topic(self, name: str, partitions: int | None, configs: dict[str, str] | None = None,
                     validate_only: bool = False) -> TopicInfo:
        """Creates a topic on a single node, blocking: for the internal topics and Metadata's
        auto-creation (a few partitions each). CreateTopics uses ``create_topic_async``."""
        count, configs, config = self._new_topic(name, partitions, configs)
        if validate_only:
            return TopicInfo(name, uuid.UUID(int=0), count, configs)
        return self._commit_topic(name, count, configs, self.log_directory.make_logs(name, range(count), config))

    async def create_topic_async(self, name: str, partitions: int | None,
                                 configs: dict[str, str] | None = None) -> TopicInfo:
        """CreateTopics on a single node. The partitions' files are made in a worker thread, so a topic
        of thousands of partitions does not stop the loop (1,000 cost 1-4 s of mkdir, file creation and
        fsync on a plain disk); the topic appears with all its partitions when topics.json names it."""
        return await _to_the_end(self._create_topic(name, partitions, configs))

    async def _create_topic(self, name: str, partitions: int | None, configs: dict[str, str] | None) -> TopicInfo:
        async with self._topic_changes:
            count, configs, config = self._new_topic(name, partitions, configs)
            self._pending_topics.add(name)
            try:
                logs = await asyncio.to_thread(self.log_directory.make_logs, name, range(count), config)
                return self._commit_topic(name, count, configs, logs)
            finally:
                self._pending_topics.discard(name)

    def _new_topic(self, name: str, partitions: int | None,
                   configs: dict[str, str] | None) -> tuple[int, dict[str, str], LogConfig]:
        """What a new topic will be (partition count, configs, its logs' config), or why it cannot."""
        count = self.config.num_partitions if partitions is None or partitions == -1 else partitions
        configs = dict(configs or {})
        check_names(configs)
        validate_topic_name(name)
        if name in self._pending_topics:  # only Metadata's auto-creation can meet one (CreateTopics queue)
            raise LeaderNotAvailableError(f"topic {name!r} is being created")
        if self.topics.get(name) is not None:
            raise TopicAlreadyExistsError(f"topic {name!r} already exists")
        if count < 1:
            raise InvalidPartitionsError(f"a topic needs at least one partition, got {count}")
        try:
            config = self.log_config_for(TopicInfo(name, uuid.UUID(int=0), count, configs))
        except ValueError as exc:
            raise InvalidConfigError(str(exc)) from exc
        return count, configs, config

    def _commit_topic(self, name: str, count: int, configs: dict[str, str], logs: list[Log]) -> TopicInfo:
        """prepare (the logs, made but not served) -> log (topics.json) -> apply (the partitions served). A
        crash before topics.json names the topic leaves directories that the next start removes as
        orphans (``remove_orphan_logs``)."""
        try:
            info = self.topics.create(name, count, configs)
        except BaseException:
            self.log_directory.discard_logs(logs)
            raise
        self._serve(info, range(count), logs)
        log.info("created topic %s with %d partitions", name, count)
        return info

    def _detach(self, replicas: list[tuple[str, int]]) -> list[str]:
        """Stops serving the partitions and detaches their logs (loop thread, no fsync); the directories
        for ``LogDirectory.remove_detached``."""
        doomed = []
        for topic, index in replicas:
            partition = self.partitions.pop((topic, index), None)
            if partition is not None:
                partition.wake_fetchers()
            path = self.log_directory.detach_log(topic, index)
            if path is not None:
                doomed.append(path)
        return doomed

    def _serve(self, info: TopicInfo, indexes: range, logs: list[Log]) -> None:
        for index, partition_log in zip(indexes, logs, strict=True):
            self.log_directory.adopt(partition_log)
            self._opened(self._partition(info.name, index, partition_log))

    def register_internal_topic(self, spec: InternalTopic) -> None:
        """An internal topic a coordinator keeps its state in (the coordinator runtime registers its own)."""
        self.internal_topics[spec.name] = spec

    def ensure_internal_topic(self, name: str) -> TopicInfo:
        info = self.topics.get(name)
        if info is not None:
            return info
        spec = self.internal_topics[name]
        if self.cluster is not None:
            self.request_internal_topic(name)
            raise CoordinatorNotAvailableError(f"{name} is being created")
        # The spec's configs on top of the internal defaults, as a cluster creates it: the share
        # coordinator's topic must not be compacted.
        return self.create_topic(name, spec.partitions, spec.configs)

    def request_internal_topic(self, name: str) -> None:
        """Cluster mode: creates an internal topic in the background (Kafka's replication factor rule: as
        many live brokers as its replication factor, e.g. offsets.topic.replication.factor, or the topic
        waits)."""
        if name in self._creating:
            return
        spec = self.internal_topics[name]
        live = len(self.cluster.view.brokers)
        if live < spec.replication_factor:
            log.warning("cannot create %s yet: replication factor %d needs %d live brokers, %d are registered",
                        name, spec.replication_factor, spec.replication_factor, live)
            return
        configs = {**INTERNAL_TOPIC_CONFIGS, **spec.configs}
        if spec.min_insync_replicas is not None:
            configs["min.insync.replicas"] = str(spec.min_insync_replicas)
        self._create_in_background(name, spec.partitions, spec.replication_factor, configs)

    @property
    def auto_creates_topics(self) -> bool:
        """auto.create.topics.enable: Metadata creates a topic it is asked about (when the client allows)."""
        return self.config.auto_create_topics_enable

    def auto_create_topic(self, name: str) -> TopicInfo | None:
        """Metadata's auto-creation (auto.create.topics.enable): made at once on a single node; on a
        cluster asked of the controller in the background, None meanwhile (the client sees
        LEADER_NOT_AVAILABLE and asks again, as with Kafka)."""
        if self.cluster is None:
            return self.create_topic(name, None)
        self.request_topic_creation(name)
        return None

    def request_topic_creation(self, name: str) -> None:
        """Cluster mode: Metadata's auto-creation, in the background (the client sees
        LEADER_NOT_AVAILABLE and asks again, as with Kafka)."""
        self._create_in_background(name, self.config.num_partitions, self.config.default_replication_factor, {})

    def _create_in_background(self, name: str, count: int, factor: int, configs: dict[str, str]) -> None:
        if name in self._creating:
            return

        async def create() -> None:
            try:
                replicas = self.topics.plan_assignment(count, factor)
                await self.topics.create(name, replicas, configs, timeout_s=30)
            except TopicAlreadyExistsError:
                pass
            except Exception:
                log.exception("creating topic %s failed", name)
            finally:
                self._creating.discard(name)

        self._creating.add(name)
        asyncio.get_running_loop().create_task(create())

    async def delete_topic(self, name: str) -> TopicInfo:
        """DeleteTopics on a single node: topics.json first, then the logs are detached on the loop (no
        fsync) and their directories removed in a worker thread."""
        return await _to_the_end(self._delete_topic(name))

    async def _delete_topic(self, name: str) -> TopicInfo:
        async with self._topic_changes:
            info = self.topics.delete(name)
            doomed = self._detach([(name, index) for index in range(info.partitions)])
            await asyncio.to_thread(self.log_directory.remove_detached, doomed)
            log.info("deleted topic %s", name)
            return info

    async def create_partitions(self, name: str, count: int) -> TopicInfo:
        """CreatePartitions on a single node: the new partitions' files are made in a worker thread."""
        return await _to_the_end(self._create_partitions(name, count))

    async def _create_partitions(self, name: str, count: int) -> TopicInfo:
        async with self._topic_changes:
            info = self.topics.require(name)
            old = info.partitions
            if count <= old:
                raise InvalidPartitionsError(
                    f"topic {name!r} has {old} partitions; the new count {count} must be larger")
            logs = await asyncio.to_thread(self.log_directory.make_logs, name, range(old, count),
                                           self.log_config_for(info))
            try:
                self.topics.set_partitions(name, count)
            except BaseException:
                self.log_directory.discard_logs(logs)
                raise
            self._serve(info, range(old, count), logs)
            log.info("topic %s grew from %d to %d partitions", name, old, count)
            return info

    def set_default_log_properties(self, properties: dict[str, str], sources: dict[str, int]) -> None:
        """New broker-level log defaults (a dynamic broker config; ``sources``: the DescribeConfigs source of
        the dynamic ones): new topics get them, and every open log takes its topic's config again, so those
        whose topic does not override a default follow it."""
        self.default_log_properties.clear()
        self.default_log_properties.update(properties)
        self.default_log_sources = dict(sources)
        for (topic, _), partition in list(self.partitions.items()):
            partition.log.config = self.log_config_for_topic(topic)

    def alter_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        info = self.topics.require(name)
        try:
            config = LogConfig.from_properties({**self.default_log_properties, **configs})
        except ValueError as exc:
            raise InvalidConfigError(str(exc)) from exc
        self.topics.set_configs(name, configs)
        checks = self._record_checks(name)
        for index in range(info.partitions):
            self.partition(name, index).log.config = config
            self.partition(name, index).record_checks = checks

    def topic_ids(self) -> dict[str, Any]:
        return {name: info.topic_id for name, info in self.topics.topics.items()}
    # ---- cluster mode: the replica manager's LocalReplicas (cluster/replica_manager.py) -----------------

    def has_log(self, topic: str, index: int) -> bool:
        return self.log_directory.get_log(topic, index) is not None

    def _replica_config(self, topic: str) -> LogConfig:
        info = self.topics.get(topic)
        return self.log_config_for(info) if info is not None else LogConfig.from_properties(self.default_log_properties)

    def open_replica(self, topic: str, index: int) -> Partition:
        config = self._replica_config(topic)
        partition_log = self.log_directory.get_or_create_log(topic, index, config)
        partition_log.config = config
        return self._open_replica(topic, index, partition_log)

    def _open_replica(self, topic: str, index: int, partition_log: Log) -> Partition:
        # No writes until the controller makes this replica the leader.
        partition = self._partition(topic, index, partition_log, writable=False)
        self._opened(partition)
        return partition

    async def open_new_replicas(self, topic: str, indexes: list[int]) -> None:
        """New replicas: their logs made in a worker thread (as a single node's CreateTopics does), then
        registered and served on the loop."""
        config = self._replica_config(topic)
        logs = await asyncio.to_thread(self.log_directory.make_logs, topic, indexes, config)
        adopted = 0
        try:
            for partition_log in logs:
                self.log_directory.adopt(partition_log)
                adopted += 1
        except BaseException:
            self.log_directory.discard_logs(logs[adopted:])  # the broker is closing: nothing to serve
            raise
        for index, partition_log in zip(indexes, logs, strict=True):
            self._open_replica(topic, index, partition_log).open_leader_epochs(new=True)
        log.info("opened %d new replica(s) of %s", len(indexes), topic)

    def remove_replicas(self, replicas: list[tuple[str, int]]) -> None:
        """Replicas the cluster no longer places here: unserved and detached at once (no fsync), their
        directories removed in a worker thread (as a single node's DeleteTopics does)."""
        doomed = self._detach(replicas)
        log.info("removing %d local replica(s) the cluster no longer places here: %s", len(replicas),
                 _describe(replicas))
        if doomed:
            task = asyncio.get_running_loop().create_task(asyncio.to_thread(self.log_directory.remove_detached, doomed))
            self._removals.add(task)
            task.add_done_callback(self._removals.discard)

    def apply_topic_configs(self, view) -> None:
        configs: dict[str, LogConfig | None] = {}  # per topic, once per view: 1,000 partitions share one
        checks: dict[str, tuple[RecordCheck, ...]] = {}
        for (topic, _), partition in self.partitions.items():
            if topic not in checks:
                checks[topic] = self._record_checks(topic)
            if partition.record_checks != checks[topic]:
                partition.record_checks = checks[topic]
            if topic not in configs:
                info = self.topics.get(topic)
                try:
                    configs[topic] = self.log_config_for(info) if info is not None else None
                except ValueError:  # ConfigError is one
                    log.exception("ignoring the invalid configs of topic %s in ZooKeeper", topic)
                    configs[topic] = None
            config = configs[topic]
            if config is not None and config != partition.log.config:
                partition.log.config = config

    def min_insync_replicas(self, topic: str) -> int:
        info = self.topics.get(topic)
        value = info.configs.get("min.insync.replicas") if info is not None else None
        if value is None and topic in self.internal_topics:
            value = self.internal_topics[topic].min_insync_replicas
        return int(value) if value is not None else self.config.min_insync_replicas

    async def expire_producers(self, interval_ms: int, producer_id_expiration_ms: int) -> None:
        """Every ``interval_ms``, the partitions' transaction-side housekeeping: drop ``.txnindex`` files
        of deleted segments and forget producers silent for producer.id.expiration.ms (Kafka's
        LogManager does both)."""
        while True:
            await asyncio.sleep(interval_ms / 1000)
            now = int(time.time() * 1000)
            for partition in list(self.partitions.values()):
                try:
                    partition.maintain_transaction_index()
                    partition.producer_state.remove_expired(now, producer_id_expiration_ms)
                except Exception:
                    log.exception("%s: producer expiry failed", partition.name)


def _describe(replicas: list[tuple[str, int]]) -> str:
    """A log line's list of partitions: all of them when few, a count per topic when many."""
    if len(replicas) <= 10:
        return ", ".join(f"{t}-{p}" for t, p in replicas)
    counts: dict[str, int] = {}
    for topic, _ in replicas:
        counts[topic] = counts.get(topic, 0) + 1
    return ", ".join(f"{n} of {t}" for t, n in counts.items())


def _to_the_end(change: Coroutine[Any, Any, TopicInfo]) -> Awaitable[TopicInfo]:
    """Runs a topic change to its end even when the request that asked for it is cancelled (its client
    hung up): stopped while its worker thread makes files, it would leave them made but never served or
    removed, and the topic could not be created again until a restart. Like Kafka, the change happens
    whether or not anyone is left to hear the answer."""
    task = asyncio.get_running_loop().create_task(change)
    task.add_done_callback(lambda done: done.cancelled() or done.exception())  # retrieved: no "never retrieved"
    return asyncio.shield(task)
