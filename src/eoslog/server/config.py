"""Broker configuration, with Kafka's property names where Kafka has the setting.

A config file is a Java-style properties file (``key=value``, ``#`` comments). Command-line flags win
over the file. Unknown properties are an error that names the closest known one, so a typo never silently
falls back to a default (see KAFKA_PROPERTIES_NOT_IMPLEMENTED for the one exception).
Broker-level ``log.*`` properties are the defaults for the topic-level names Kafka maps them to.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from eoslog.security.properties import ConfigError

log = logging.getLogger(__name__)


# broker property -> topic property it provides the default for (Kafka's mapping)
LOG_DEFAULTS = {
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.retention.ms": "retention.ms",
    "log.retention.bytes": "retention.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.index.size.max.bytes": "segment.index.bytes",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "log.message.timestamp.type": "message.timestamp.type",
    "log.message.timestamp.before.max.ms": "message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms": "message.timestamp.after.max.ms",
    "message.max.bytes": "max.message.bytes",
    "log.cleanup.policy": "cleanup.policy",
    "log.segment.delete.delay.ms": "file.delete.delay.ms",
    # eoslog's own (docs/durability.md): fsync before an acks=all answer; the topic name with Kafka's
    # `log.` prefix, so that one grep finds both levels.
    "log.eoslog.fsync.on.ack": "eoslog.fsync.on.ack",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
}
# Test-only switches that break exactly-once on purpose, so that `eoslog verify` can show it notices
# (tests/verify/test_verify_run.py). Refused unless EOSLOG_ALLOW_TEST_FAULTS=1; never for real use.
# Kafka's default is -1 (unbounded); ours bounds the memory of requests being received.
DEFAULT_QUEUED_MAX_REQUEST_BYTES = 256 * 1024 * 1024
TEST_FAULTS_ENV = "EOSLOG_ALLOW_TEST_FAULTS"
TEST_FAULT_PROPERTIES = {
    # retried batches are appended again instead of answered with their original offsets
    "eoslog.test.disable.duplicate.detection": "test_disable_duplicate_detection",
    # read_committed fetches read up to the high watermark, open transactions included
    "eoslog.test.read.committed.past.lso": "test_read_committed_past_lso",
}
# Test-only crash points, read from config.test_faults by their owner (same guard as above).
TEST_CRASH_PROPERTIES = frozenset({
    # SIGKILL right after a transaction group's commit point is durable, before any member moves
    # (coordinator/transaction_groups/extension.py; tests/transactions/test_transaction_groups.py)
    "eoslog.test.crash.after.group.commit.record",
    # a broker that becomes leader of a __transaction_state partition serves it without loading it:
    # the transactions the previous coordinator left are forgotten (coordinator/transaction/shard.py;
    # tests/verify/test_verify_cluster.py shows the cluster verifier reports it)
    "eoslog.test.skip.coordinator.load",
    # SIGKILL right after a transaction marker on __share_group_state is durable, before the share
    # coordinator decides the pending acknowledgements and before any leader applies them: the transaction
    # is still PrepareCommit/PrepareAbort at its coordinator (server/broker.py, issue 37 step 6;
    # tests/share/test_share_txn_broker.py)
    "eoslog.test.crash.after.share.state.marker",
})
# Broker property names that changed; the error names the new one instead of "unknown property".
_RENAMED = {"eoslog.fsync.on.ack": "log.eoslog.fsync.on.ack"}
# Hours/minutes spellings Kafka also accepts, converted to the millisecond property.
_TIME_ALIASES = {
    "log.retention.hours": ("log.retention.ms", 3_600_000),
    "log.retention.minutes": ("log.retention.ms", 60_000),
    "log.roll.hours": ("log.roll.ms", 3_600_000),
}

# property -> (BrokerConfig attribute, minimum) for the plain integer properties
_SIMPLE_INTS = {
    "node.id": ("node_id", 0),
    "broker.id": ("node_id", 0),
    "num.partitions": ("num_partitions", 1),
    "socket.request.max.bytes": ("socket_request_max_bytes", 1024),
    "socket.listen.backlog.size": ("socket_listen_backlog_size", 1),
    "max.connections": ("max_connections", 1),
    "max.connections.per.ip": ("max_connections_per_ip", 1),
    "connections.max.idle.ms": ("connections_max_idle_ms", 1000),
    "connections.max.reauth.ms": ("connections_max_reauth_ms", 0),
    "sasl.server.max.receive.size": ("sasl_server_max_receive_size", 1024),
    "eoslog.authentication.timeout.ms": ("authentication_timeout_ms", 100),
    "offsets.topic.num.partitions": ("offsets_topic_num_partitions", 1),
    "transaction.state.log.num.partitions": ("transaction_state_log_num_partitions", 1),
    "group.initial.rebalance.delay.ms": ("group_initial_rebalance_delay_ms", 0),
    "group.min.session.timeout.ms": ("group_min_session_timeout_ms", 0),
    "group.max.session.timeout.ms": ("group_max_session_timeout_ms", 0),
    "group.consumer.session.timeout.ms": ("group_consumer_session_timeout_ms", 1),
    "group.consumer.heartbeat.interval.ms": ("group_consumer_heartbeat_interval_ms", 1),
    # share groups (KIP-932, docs/share-groups.md): Kafka 4.2's GroupCoordinatorConfig and ShareGroupConfig
    "group.share.session.timeout.ms": ("group_share_session_timeout_ms", 1),
    "group.share.min.session.timeout.ms": ("group_share_min_session_timeout_ms", 1),
    "group.share.max.session.timeout.ms": ("group_share_max_session_timeout_ms", 1),
    "group.share.heartbeat.interval.ms": ("group_share_heartbeat_interval_ms", 1),
    "group.share.min.heartbeat.interval.ms": ("group_share_min_heartbeat_interval_ms", 1),
    "group.share.max.heartbeat.interval.ms": ("group_share_max_heartbeat_interval_ms", 1),
    "group.share.max.size": ("group_share_max_size", 1),
    "group.share.record.lock.duration.ms": ("group_share_record_lock_duration_ms", 1000),
    "group.share.min.record.lock.duration.ms": ("group_share_min_record_lock_duration_ms", 1000),
    "group.share.max.record.lock.duration.ms": ("group_share_max_record_lock_duration_ms", 30_000),
    "group.share.delivery.count.limit": ("group_share_delivery_count_limit", 2),
    "group.share.partition.max.record.locks": ("group_share_partition_max_record_locks", 100),
    "group.share.max.share.sessions": ("group_share_max_share_sessions", 1),
    "group.share.initialize.retry.interval.ms": ("group_share_initialize_retry_interval_ms", 1),
    "offsets.retention.minutes": ("offsets_retention_minutes", 1),
    "offsets.retention.check.interval.ms": ("offsets_retention_check_interval_ms", 1),
    "transaction.max.timeout.ms": ("transaction_max_timeout_ms", 1),
    "transactional.id.expiration.ms": ("transactional_id_expiration_ms", 1),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (
        "transaction_abort_timed_out_transaction_cleanup_interval_ms", 1),
    "producer.id.expiration.ms": ("producer_id_expiration_ms", 1),
    # eoslog's check-back transactions (docs/transactions.md, "Check-back transactions")
    "eoslog.transaction.check.max.checks": ("transaction_check_max_checks", 1),
    "eoslog.transaction.check.backoff.ms": ("transaction_check_backoff_ms", 1),
    "eoslog.transaction.check.backoff.max.ms": ("transaction_check_backoff_max_ms", 1),
    "eoslog.transaction.check.lease.ms": ("transaction_check_lease_ms", 1),
    "log.retention.check.interval.ms": ("log_retention_check_interval_ms", 1),
    "log.cleaner.backoff.ms": ("log_cleaner_backoff_ms", 1),
    "log.cleaner.dedupe.buffer.size": ("log_cleaner_dedupe_buffer_size", 1024),
    "zookeeper.session.timeout.ms": ("zookeeper_session_timeout_ms", 1000),
    "zookeeper.connection.timeout.ms": ("zookeeper_connection_timeout_ms", 100),
    "default.replication.factor": ("default_replication_factor", 1),
    "min.insync.replicas": ("min_insync_replicas", 1),
    "replica.lag.time.max.ms": ("replica_lag_time_max_ms", 100),
    "replica.fetch.wait.max.ms": ("replica_fetch_wait_max_ms", 0),
    "replica.fetch.max.bytes": ("replica_fetch_max_bytes", 1024),
    "replica.fetch.backoff.ms": ("replica_fetch_backoff_ms", 0),
    "leader.imbalance.check.interval.seconds": ("leader_imbalance_check_interval_seconds", 1),
    "offsets.topic.replication.factor": ("offsets_topic_replication_factor", 1),
    "transaction.state.log.replication.factor": ("transaction_state_log_replication_factor", 1),
    "transaction.state.log.min.isr": ("transaction_state_log_min_isr", 1),
    # the share coordinator (KIP-932, coordinator/share/): Kafka's ShareCoordinatorConfig
    "share.coordinator.state.topic.num.partitions": ("share_coordinator_state_topic_num_partitions", 1),
    "share.coordinator.state.topic.replication.factor": ("share_coordinator_state_topic_replication_factor", 1),
    "share.coordinator.state.topic.min.isr": ("share_coordinator_state_topic_min_isr", 1),
    "share.coordinator.state.topic.segment.bytes": ("share_coordinator_state_topic_segment_bytes", 1),
    "share.coordinator.snapshot.update.records.per.snapshot": (
        "share_coordinator_snapshot_update_records_per_snapshot", 0),
    "share.coordinator.state.topic.prune.interval.ms": ("share_coordinator_state_topic_prune_interval_ms", 1),
    "share.coordinator.cold.partition.snapshot.interval.ms": (
        "share_coordinator_cold_partition_snapshot_interval_ms", 1),
}

# The plain integers with an upper bound too (Kafka's ConfigDef ranges).
_MAXIMA = {"share.coordinator.snapshot.update.records.per.snapshot": 500, "group.share.max.size": 1000,
           "group.share.record.lock.duration.ms": 3_600_000, "group.share.min.record.lock.duration.ms": 30_000,
           "group.share.max.record.lock.duration.ms": 3_600_000, "group.share.delivery.count.limit": 10,
           "group.share.partition.max.record.locks": 10_000}


# Other names set_property takes; with the dicts above and the security names, what a typo is compared to.
_OTHER_PROPERTIES = frozenset({
    "queued.max.request.bytes", "max.connections.per.ip.overrides", "auto.create.topics.enable",
    "unclean.leader.election.enable", "auto.leader.rebalance.enable", "zookeeper.connect", "broker.rack",
    "log.cleaner.enable", "log.cleaner.process", "eoslog.log.flush.syncfs", "log.dirs", "log.dir", "listeners", "advertised.listeners",
    "listener.security.protocol.map", "inter.broker.listener.name", "security.inter.broker.protocol",
    "authorizer.class.name", "super.users", "allow.everyone.if.no.acl.found", "cluster.id", "eoslog.metrics.listen",
    "eoslog.console.listen", "eoslog.console.allow.writes", "eoslog.console.command.config",
    "eoslog.schema.registry.listen", "eoslog.schema.registry.command.config", "eoslog.schema.registry.basic.auth",
    "eoslog.schema.registry.authorization", "eoslog.schema.validation.topic",
    "group.consumer.assignors", "eoslog.share.persist.acquisitions",
})
# Unknown names: Kafka itself logs a warning and ignores a name it does not know, so a typo silently runs
# the broker on the default. eoslog knows every name it accepts, and a typo of one of them is by far the
# common mistake, so an unknown name is an error that suggests the nearest known one. The exception is a
# real Kafka broker property eoslog has no use for (thread pools, socket buffers and other JVM-side tuning
# in Kafka's stock server.properties; every name of server/kafka_broker_properties.py eoslog does not
# implement): a Kafka config file must still start, so those warn and are ignored. These older names are
# not in Kafka 4.x's list but are still in many config files.
KAFKA_PROPERTIES_NOT_IMPLEMENTED = frozenset({
    "num.network.threads", "num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir",
    "background.threads", "queued.max.requests", "socket.send.buffer.bytes", "socket.receive.buffer.bytes",
    "replica.socket.timeout.ms", "replica.socket.receive.buffer.bytes", "replica.high.watermark.checkpoint.interval.ms",
    "controller.socket.timeout.ms", "controlled.shutdown.enable", "delete.topic.enable", "log.flush.scheduler.interval.ms",
    "log.flush.offset.checkpoint.interval.ms", "log.cleaner.threads", "log.cleaner.io.max.bytes.per.second",
    "log.preallocate", "inter.broker.protocol.version", "log.message.format.version", "metric.reporters",
    "request.timeout.ms", "compression.type",
})


def implemented_names() -> frozenset[str]:
    """Every broker property name eoslog acts on (prefix families aside)."""
    from eoslog.server.tls import SSL_PROPERTIES

    return frozenset({*LOG_DEFAULTS, *_TIME_ALIASES, *_RENAMED, *_SIMPLE_INTS, *_OTHER_PROPERTIES,
                      *SSL_PROPERTIES, *SASL_PROPERTIES})


def _is_implemented(name: str) -> bool:
    """``name in implemented_names()``, without importing server/tls.py (ssl's contexts, the principal
    mapping) for a name that is not one of its ``ssl.`` properties: `eoslog serve` opens its port sooner."""
    if name.startswith("ssl."):
        return name in implemented_names()
    return name in LOG_DEFAULTS or name in _TIME_ALIASES or name in _RENAMED or name in _SIMPLE_INTS \
        or name in _OTHER_PROPERTIES or name in SASL_PROPERTIES


def is_ignored_kafka_property(name: str) -> bool:
    """A Kafka broker property eoslog accepts but does not use."""
    if _is_implemented(name):  # first: Kafka's table (server/kafka_broker_properties.py) loads only when needed
        return False
    from eoslog.server.kafka_broker_properties import KAFKA_BROKER_PROPERTIES

    return (name in KAFKA_PROPERTIES_NOT_IMPLEMENTED or name in KAFKA_BROKER_PROPERTIES) \
        and not _is_listener_secret(name)


def _is_listener_secret(name: str) -> bool:
    """A credential of Kafka's for the listeners' TLS or SASL that eoslog takes in another form
    (sasl.jaas.config, keystore passwords, PEM keys inline): ignored, the broker would secure its listeners
    other than the operator believes, so it stays refused, naming the security properties eoslog takes."""
    from eoslog.server.kafka_broker_properties import KAFKA_BROKER_PROPERTIES

    known = KAFKA_BROKER_PROPERTIES.get(name)
    return known is not None and known.type == "password" and name.startswith(("ssl.", "sasl."))


def known_properties() -> frozenset[str]:
    """Every broker property name set_property accepts exactly (prefix families aside)."""
    from eoslog.server.kafka_broker_properties import KAFKA_BROKER_PROPERTIES

    return implemented_names() | KAFKA_PROPERTIES_NOT_IMPLEMENTED | {
        n for n in KAFKA_BROKER_PROPERTIES if not _is_listener_secret(n) or n in implemented_names()}


def unknown_property_message(name: str) -> str:
    """"unknown broker property 'x'", with the closest known name when one is close (a typo)."""
    import difflib

    close = difflib.get_close_matches(name, known_properties(), n=1, cutoff=0.8)
    return f"unknown broker property {name!r}" + (f"; did you mean {close[0]!r}?" if close else "")


def _bool(name: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise ConfigError(f"{name}: expected true or false, got {value!r}")


def _int(name: str, value: str, minimum: int | None = None, maximum: int | None = None) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        raise ConfigError(f"{name}: expected an integer, got {value!r}") from None
    if minimum is not None and number < minimum:
        raise ConfigError(f"{name}: must be at least {minimum}, got {number}")
    if maximum is not None and number > maximum:
        raise ConfigError(f"{name}: must be at most {maximum}, got {number}")
    return number


def _parsed(parser, *args):
    """A parser's ValueError (a bad listener, map or override) as a ConfigError."""
    try:
        return parser(*args)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


def _listener_names(spec: str) -> list[str]:
    return [item.split("://")[0].strip().upper() for item in spec.split(",") if "://" in item]


def parse_host_port(text: str, what: str = "address") -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise ConfigError(f"{what}: expected HOST:PORT, got {text!r}")
    host = host.strip("[]")
    # A port past 65535 is taken modulo 65536 by the kernel (70000 would bind 4464): refused instead.
    return host, _int(what, port, minimum=0, maximum=65535)


# SASL properties kept in security_properties (also as listener.name.<listener>.<property>).
SASL_PROPERTIES = frozenset({"sasl.enabled.mechanisms", "sasl.mechanism.inter.broker.protocol"})
DEFAULT_SASL_MECHANISMS = "SCRAM-SHA-256,SCRAM-SHA-512"


def _check_mechanisms(name: str, value: str) -> None:
    from eoslog.security.sasl import SUPPORTED_MECHANISMS

    for mechanism in (m.strip().upper() for m in value.split(",") if m.strip()):
        if mechanism not in SUPPORTED_MECHANISMS:
            raise ConfigError(f"{name}: {mechanism} is not supported; supported: {', '.join(SUPPORTED_MECHANISMS)}"
                              " (GSSAPI and OAUTHBEARER are not; docs/security.md)")


def _is_jaas_config(base: str) -> bool:
    """``<mechanism in lower case>.sasl.jaas.config``: what follows ``listener.name.<listener>.`` in Kafka's
    per-listener, per-mechanism login (the only form of sasl.jaas.config a broker takes)."""
    from eoslog.security.sasl import SUPPORTED_MECHANISMS

    mechanism, sep, rest = base.partition(".")
    return bool(sep) and rest == "sasl.jaas.config" and mechanism.upper() in SUPPORTED_MECHANISMS


@dataclass
class BrokerConfig:
    data_dir: Path = Path("./eoslog-data")
    listen_host: str = "127.0.0.1"
    listen_port: int = 9092
    advertised_host: str | None = None
    advertised_port: int | None = None
    node_id: int = 0
    cluster_id: str | None = None  # persisted in meta.properties on first start
    num_partitions: int = 1
    auto_create_topics_enable: bool = True
    socket_request_max_bytes: int = 100 * 1024 * 1024
    # Connections the kernel holds for a listener until the broker accepts them (KIP-764; capped by
    # net.core.somaxconn). 100, asyncio's default that eoslog always used (Kafka's is 50): once it is
    # full, the kernel drops a client's SYN and the client only tries again a second later.
    socket_listen_backlog_size: int = 100
    # ---- resource bounds (server/limits.py, docs/security.md) -------------------------------------------
    # None: max(DEFAULT_QUEUED_MAX_REQUEST_BYTES, socket.request.max.bytes); -1: unbounded, as Kafka's own
    # default (ours is bounded: a broker no client can exhaust is the point).
    queued_max_request_bytes: int | None = None
    max_connections: int | None = None  # None: no limit
    max_connections_per_ip: int | None = None
    max_connections_per_ip_overrides: dict[str, int] = field(default_factory=dict)
    connections_max_idle_ms: int = 600_000
    # ---- listeners and TLS (server/listeners.py, server/tls.py, docs/security.md) ------------------------
    # The primary listener is listen_host:listen_port under the first name of `listeners` (PLAINTEXT by
    # default); the others of `listeners` are served beside it.
    listeners_spec: str | None = None
    advertised_listeners_spec: str | None = None
    listener_protocol_map: dict[str, str] | None = None
    inter_broker_listener_name: str | None = None
    inter_broker_protocol: str | None = None  # security.inter.broker.protocol, Kafka's older way to name it
    security_properties: dict[str, str] = field(default_factory=dict)  # ssl.*, sasl.*, listener.name.*.(ssl|sasl).*
    # ---- SASL (security/sasl.py, docs/security.md) --------------------------------------------------------
    connections_max_reauth_ms: int = 0  # KIP-368 session lifetime; 0: sessions never end
    sasl_server_max_receive_size: int = 524_288  # the largest frame before authentication
    authentication_timeout_ms: int = 10_000  # eoslog.authentication.timeout.ms: TLS and SASL must complete by then
    # ---- authorization (security/, docs/security.md "Authorization (ACLs)"): empty = no authorizer -------
    authorizer_class_name: str = ""
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False
    # A single node sizes its internal topics to itself: replication factor 1, always.
    offsets_topic_num_partitions: int = 10
    transaction_state_log_num_partitions: int = 10
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    # consumer groups (KIP-848, docs/groups.md "The consumer group protocol")
    group_consumer_session_timeout_ms: int = 45_000
    group_consumer_heartbeat_interval_ms: int = 5_000
    group_consumer_assignors: tuple[str, ...] = ("uniform", "range")
    # share groups (KIP-932, docs/share-groups.md): Kafka 4.2's names, defaults and bounds
    group_share_session_timeout_ms: int = 45_000
    group_share_min_session_timeout_ms: int = 45_000
    group_share_max_session_timeout_ms: int = 60_000
    group_share_heartbeat_interval_ms: int = 5_000
    group_share_min_heartbeat_interval_ms: int = 5_000
    group_share_max_heartbeat_interval_ms: int = 15_000
    group_share_max_size: int = 200
    group_share_record_lock_duration_ms: int = 30_000
    group_share_min_record_lock_duration_ms: int = 15_000
    group_share_max_record_lock_duration_ms: int = 60_000
    group_share_delivery_count_limit: int = 5
    group_share_partition_max_record_locks: int = 2_000
    group_share_max_share_sessions: int = 2_000
    group_share_initialize_retry_interval_ms: int = 30_000
    # eoslog's own: write acquisitions to the share coordinator too, so a failover finds exact delivery
    # counts (Kafka does not; docs/share-groups.md, "Persisting acquisitions")
    share_persist_acquisitions: bool = True
    offsets_retention_minutes: int = 7 * 24 * 60
    offsets_retention_check_interval_ms: int = 600_000  # Kafka's default, 10 minutes
    transaction_max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 7 * 24 * 3_600_000
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10_000
    producer_id_expiration_ms: int = 24 * 3_600_000
    # check-back transactions (docs/transactions.md): a timed-out one is asked this many times, the k-th
    # unknown answer waiting backoff * 2^(k-1) (at most backoff.max) before the next; a polled check is
    # lent to its poller for lease.ms, then counts as unanswered.
    transaction_check_max_checks: int = 15  # RocketMQ's transactionCheckMax
    transaction_check_backoff_ms: int = 1_000
    transaction_check_backoff_max_ms: int = 60_000
    transaction_check_lease_ms: int = 30_000
    log_retention_check_interval_ms: int = 300_000
    log_cleaner_enable: bool = True
    log_cleaner_backoff_ms: int = 15_000  # how long the cleaner sleeps when no log needs cleaning
    log_cleaner_dedupe_buffer_size: int = 128 * 1024 * 1024  # the offset map's memory budget
    # eoslog's own: a pass's CPU work in a child process (true) or in a thread sharing the loop's GIL (false)
    log_cleaner_process: bool = True
    # eoslog's own: fsync-before-ack rounds of the data directory as one syncfs(2) of its filesystem (true,
    # when the kernel reports writeback errors to syncfs: log/syncfs.py) or one fsync per file (false)
    log_flush_syncfs: bool = True
    # ---- cluster mode (docs/cluster.md): set by zookeeper.connect; without it, a single node ------------
    zookeeper_connect: str | None = None
    zookeeper_session_timeout_ms: int = 18_000
    zookeeper_connection_timeout_ms: int | None = None
    broker_rack: str | None = None
    default_replication_factor: int = 1
    min_insync_replicas: int = 1
    replica_lag_time_max_ms: int = 30_000
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_max_bytes: int = 1024 * 1024
    replica_fetch_backoff_ms: int = 1000
    unclean_leader_election_enable: bool = False
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_seconds: int = 300
    offsets_topic_replication_factor: int = 3
    transaction_state_log_replication_factor: int = 3
    transaction_state_log_min_isr: int = 2
    # the share coordinator (coordinator/share/config.py): Kafka's names and defaults
    share_coordinator_state_topic_num_partitions: int = 50
    share_coordinator_state_topic_replication_factor: int = 3
    share_coordinator_state_topic_min_isr: int = 2
    share_coordinator_state_topic_segment_bytes: int = 100 * 1024 * 1024
    share_coordinator_snapshot_update_records_per_snapshot: int = 500  # at most 500, as Kafka allows
    share_coordinator_state_topic_prune_interval_ms: int = 300_000
    share_coordinator_cold_partition_snapshot_interval_ms: int = 300_000
    # The defaults every topic's log starts from (topic property names; see LOG_DEFAULTS).
    log_defaults: dict[str, str] = field(default_factory=dict)
    test_faults: dict[str, bool] = field(default_factory=dict)  # see TEST_FAULT_PROPERTIES
    # eoslog.metrics.listen / --metrics-listen (server/metrics.py, docs/operations.md): the Prometheus
    # endpoint's (host, port); None: off, and prometheus_client is never imported.
    metrics_listen: tuple[str, int] | None = None
    # eoslog.console.listen / --console-listen (server/console.py, docs/console.md): the web console served
    # by the broker; None: off, and nothing of eoslog.console (Starlette, uvicorn, Jinja2) is imported.
    console_listen: tuple[str, int] | None = None
    console_allow_writes: bool = False  # eoslog.console.allow.writes / --console-allow-writes
    # eoslog.console.command.config / --console-command-config: the client properties the console uses to
    # reach this broker through a secured listener (none: through the first PLAINTEXT listener).
    console_command_config: str | None = None
    # eoslog.schema.registry.listen / --schema-registry-listen (server/schema_registry.py,
    # docs/schema-registry.md): the schema registry served by the broker; None: off, and nothing of
    # eoslog.schema_registry is imported. Its command config reaches a secured listener, as the console's.
    # https://HOST:PORT serves HTTPS with the TLS settings of the broker's first SSL or SASL_SSL listener;
    # eoslog.schema.registry.basic.auth checks HTTP basic credentials against the SCRAM users.
    schema_registry_listen: tuple[str, int] | None = None
    schema_registry_https: bool = False
    schema_registry_command_config: str | None = None
    schema_registry_basic_auth: bool = False
    schema_registry_authorization: bool = False  # subjects through this broker's ACLs (needs basic.auth)
    # eoslog.schema.validation.topic: the registry's topic that schema id validation reads when this broker
    # does not serve the registry itself (server/schema_validation.py).
    schema_validation_topic: str = "_schemas"
    # name -> value of every property set in the properties file, by --set or by a serve flag, in the
    # order given: what DescribeConfigs reports as STATIC_BROKER_CONFIG (server/broker_configs.py).
    originals: dict[str, str] = field(default_factory=dict)
    # Kafka broker properties eoslog accepted but does not use (is_ignored_kafka_property), as given:
    # DescribeConfigs reports them with a note that eoslog ignores them.
    ignored_properties: dict[str, str] = field(default_factory=dict)

    def listeners(self) -> list:
        """Every listener, the primary first (its address as listen_host:listen_port say)."""
        from dataclasses import replace

        from eoslog.server.listeners import Listener, ListenerError, parse_listeners

        try:
            if self.listeners_spec is None:
                listeners = [Listener("PLAINTEXT", self.listen_host, self.listen_port,
                                      (self.listener_protocol_map or {}).get("PLAINTEXT", "PLAINTEXT"))]
            else:
                listeners = parse_listeners(self.listeners_spec, self.advertised_listeners_spec,
                                            self.listener_protocol_map)
        except ListenerError as exc:
            raise ConfigError(str(exc)) from exc
        primary = replace(listeners[0], host=self.listen_host, port=self.listen_port)
        if self.advertised_host is not None:
            primary = replace(primary, advertised_host=self.advertised_host, advertised_port=self.advertised_port)
        listeners[0] = primary
        return listeners

    def inter_broker_listener(self):
        """The listener other cluster members connect to (server/listeners.py inter_broker_listener)."""
        from eoslog.server.listeners import inter_broker_listener

        return _parsed(inter_broker_listener, self.listeners(), self.inter_broker_listener_name,
                       self.inter_broker_protocol)

    def sasl_mechanisms(self, listener) -> tuple[str, ...]:
        """The mechanisms a SASL listener offers: listener.name.<name>.sasl.enabled.mechanisms, else
        sasl.enabled.mechanisms, else SCRAM only (PLAIN sends the password itself: enable it on purpose)."""
        from eoslog.server.tls import listener_property

        text = listener_property(self.security_properties, listener, "sasl.enabled.mechanisms")
        text = DEFAULT_SASL_MECHANISMS if text is None else text
        mechanisms = tuple(dict.fromkeys(m.strip().upper() for m in text.split(",") if m.strip()))
        if not mechanisms:
            raise ConfigError(f"listener {listener.name} ({listener.protocol}) has no SASL mechanism enabled")
        return mechanisms

    @property
    def request_memory_capacity(self) -> int:
        """The ``queued.max.request.bytes`` pool's size (-1: unbounded). One frame of the largest size
        allowed must fit, or a client sending one would wait forever."""
        if self.queued_max_request_bytes is None:
            return max(DEFAULT_QUEUED_MAX_REQUEST_BYTES, self.socket_request_max_bytes)
        if self.queued_max_request_bytes != -1 and self.queued_max_request_bytes < self.socket_request_max_bytes:
            raise ConfigError(f"queued.max.request.bytes={self.queued_max_request_bytes} is below "
                              f"socket.request.max.bytes={self.socket_request_max_bytes}: a request of the "
                              "largest allowed size could never be received")
        return self.queued_max_request_bytes

    @property
    def cluster_mode(self) -> bool:
        return self.zookeeper_connect is not None

    @property
    def advertised(self) -> tuple[str, int]:
        """The primary listener's advertised address: --advertised-listener, else its entry in
        advertised.listeners, else where it listens."""
        if self.advertised_host is None and self.advertised_listeners_spec:
            primary = _listener_names(self.listeners_spec)[0] if self.listeners_spec else "PLAINTEXT"
            for item in self.advertised_listeners_spec.split(","):
                if item.strip().split("://")[0].strip().upper() == primary:
                    return parse_host_port(item.split("//")[-1], "advertised.listeners")
        return (self.advertised_host or self.listen_host, self.advertised_port or self.listen_port)

    def apply_properties(self, properties: dict[str, str]) -> None:
        for name, value in properties.items():
            self.set_property(name, value)

    def set_property(self, name: str, value: str) -> None:
        if is_ignored_kafka_property(name):  # it configures nothing
            from eoslog.server.kafka_broker_properties import value_error

            error = value_error(name, value)
            if error is not None:
                raise ConfigError(error)
            log.warning("ignoring %s=%s: a Kafka broker property eoslog does not implement", name, value)
            self.ignored_properties[name] = value
            return
        self._set_property(name, value)
        self.originals[name] = value  # only once accepted: a refused value is no source of anything

    def _set_property(self, name: str, value: str) -> None:
        if name in _TIME_ALIASES:
            target, factor = _TIME_ALIASES[name]
            self.log_defaults[LOG_DEFAULTS[target]] = str(_int(name, value) * factor)
            return
        if name in LOG_DEFAULTS:
            self.log_defaults[LOG_DEFAULTS[name]] = value
            return
        if name in _RENAMED:
            raise ConfigError(f"{name} is a topic config; the broker default is {_RENAMED[name]}")
        if name in _SIMPLE_INTS:
            attribute, minimum = _SIMPLE_INTS[name]
            number = _int(name, value, minimum)
            if name in _MAXIMA and number > _MAXIMA[name]:
                raise ConfigError(f"{name}: must be at most {_MAXIMA[name]}, got {number}")
            setattr(self, attribute, number)
        elif name == "queued.max.request.bytes":
            number = _int(name, value, -1)
            if number == 0 or number < -1:
                raise ConfigError(f"{name} must be -1 (unbounded) or a positive number of bytes, got {value!r}")
            self.queued_max_request_bytes = number
        elif name == "max.connections.per.ip.overrides":
            from eoslog.server.limits import parse_overrides

            self.max_connections_per_ip_overrides = _parsed(parse_overrides, value)
        elif name == "group.consumer.assignors":
            from eoslog.coordinator.group.assignors import ASSIGNORS

            names = tuple(n.strip() for n in value.split(",") if n.strip())
            unknown = [n for n in names if n not in ASSIGNORS]
            if not names or unknown:
                raise ConfigError(f"{name}: {', '.join(unknown) or 'empty'}; eoslog's assignors are {sorted(ASSIGNORS)}")
            self.group_consumer_assignors = names
        elif name == "eoslog.share.persist.acquisitions":
            self.share_persist_acquisitions = _bool(name, value)
        elif name == "auto.create.topics.enable":
            self.auto_create_topics_enable = _bool(name, value)
        elif name == "unclean.leader.election.enable":
            self.unclean_leader_election_enable = _bool(name, value)
        elif name == "auto.leader.rebalance.enable":
            self.auto_leader_rebalance_enable = _bool(name, value)
        elif name == "zookeeper.connect":
            self.zookeeper_connect = value.strip() or None
        elif name == "broker.rack":
            self.broker_rack = value.strip() or None
        elif name == "log.cleaner.enable":
            self.log_cleaner_enable = _bool(name, value)
        elif name == "log.cleaner.process":
            self.log_cleaner_process = _bool(name, value)
        elif name == "eoslog.log.flush.syncfs":
            self.log_flush_syncfs = _bool(name, value)
        elif name == "log.dirs" or name == "log.dir":
            self.data_dir = Path(value.split(",")[0])
        elif name == "listeners":
            from eoslog.server.listeners import parse_listeners

            # Protocols are checked when the map is known too (listeners()); here names and addresses.
            first = _parsed(parse_listeners, value, None, {n: "PLAINTEXT" for n in _listener_names(value)})[0]
            self.listeners_spec = value
            self.listen_host, self.listen_port = first.host, first.port
        elif name == "advertised.listeners":
            for item in filter(None, (part.strip() for part in value.split(","))):
                parse_host_port(item.split("//")[-1], name)  # a bad address is an error now, not at start
            self.advertised_listeners_spec = value
        elif name == "listener.security.protocol.map":
            from eoslog.server.listeners import parse_protocol_map

            self.listener_protocol_map = _parsed(parse_protocol_map, value)
        elif name == "inter.broker.listener.name":
            self.inter_broker_listener_name = value.strip().upper()
        elif name == "security.inter.broker.protocol":
            from eoslog.server.listeners import PROTOCOLS

            if value.strip().upper() not in PROTOCOLS:
                raise ConfigError(f"{name}={value}: expected one of {', '.join(PROTOCOLS)}")
            self.inter_broker_protocol = value.strip().upper()
        elif name.startswith(("ssl.", "sasl.", "listener.name.")):
            from eoslog.server.tls import SSL_PROPERTIES

            base = name.split(".", 3)[3] if name.startswith("listener.name.") and name.count(".") >= 3 else name
            if name.startswith("listener.name.") and _is_jaas_config(base):
                self.security_properties[name] = value  # this broker's login to the others (server/inter_broker.py)
                return
            if base not in SSL_PROPERTIES | SASL_PROPERTIES:
                import difflib

                close = difflib.get_close_matches(base, SSL_PROPERTIES | SASL_PROPERTIES, n=1, cutoff=0.8)
                if close:  # a typo: the same name with the listener prefix kept, as for the other names
                    raise ConfigError(f"unknown broker property {name!r}; did you mean "
                                      f"{name[:len(name) - len(base)] + close[0]!r}?")
                known = ", ".join(sorted(SSL_PROPERTIES | SASL_PROPERTIES))
                raise ConfigError(f"unknown broker property {name!r} (security properties: {known})")
            if base in SASL_PROPERTIES:
                _check_mechanisms(name, value)
            self.security_properties[name] = value
        elif name in ("authorizer.class.name", "super.users", "allow.everyone.if.no.acl.found"):
            self._set_authorization_property(name, value)
        elif name == "cluster.id":
            self.cluster_id = value
        elif name == "eoslog.metrics.listen":
            self.metrics_listen = parse_host_port(value.strip(), name) if value.strip() else None
        elif name == "eoslog.console.listen":
            self.console_listen = parse_host_port(value.strip(), name) if value.strip() else None
        elif name == "eoslog.console.allow.writes":
            self.console_allow_writes = _bool(name, value)
        elif name == "eoslog.console.command.config":
            self.console_command_config = value.strip() or None
        elif name == "eoslog.schema.registry.listen":
            scheme, _, address = value.strip().rpartition("://")
            if scheme.lower() not in ("", "http", "https"):
                raise ConfigError(f"{name}: expected [http://|https://]HOST:PORT, got {value.strip()!r}")
            self.schema_registry_https = scheme.lower() == "https"
            self.schema_registry_listen = parse_host_port(address, name) if address else None
        elif name == "eoslog.schema.registry.basic.auth":
            self.schema_registry_basic_auth = _bool(name, value)
        elif name == "eoslog.schema.registry.authorization":
            self.schema_registry_authorization = _bool(name, value)
        elif name == "eoslog.schema.registry.command.config":
            self.schema_registry_command_config = value.strip() or None
        elif name == "eoslog.schema.validation.topic":
            if not value.strip():
                raise ConfigError(f"{name}: expected a topic name")
            self.schema_validation_topic = value.strip()
        elif name.startswith("eoslog.test."):
            self._set_test_fault(name, value)
        else:
            raise ConfigError(unknown_property_message(name))

    def _set_authorization_property(self, name: str, value: str) -> None:
        from eoslog.security.acl import parse_super_users
        from eoslog.security.authorizer import AUTHORIZER_CLASS_NAMES

        if name == "authorizer.class.name":
            if value.strip() and value.strip() not in AUTHORIZER_CLASS_NAMES:
                raise ConfigError(f"{name}: {value!r} is not an authorizer eoslog has; use one of "
                                  f"{', '.join(sorted(AUTHORIZER_CLASS_NAMES))}, or leave it empty for none")
            self.authorizer_class_name = value.strip()
        elif name == "super.users":
            self.super_users = _parsed(parse_super_users, value)
        else:
            self.allow_everyone_if_no_acl_found = _bool(name, value)

    def _set_test_fault(self, name: str, value: str) -> None:
        if os.environ.get(TEST_FAULTS_ENV) != "1":
            raise ConfigError(f"{name} is a test-only fault switch, refused unless {TEST_FAULTS_ENV}=1")
        if name not in TEST_FAULT_PROPERTIES and name not in TEST_CRASH_PROPERTIES:
            known = ", ".join([*TEST_FAULT_PROPERTIES, *sorted(TEST_CRASH_PROPERTIES)])
            raise ConfigError(f"unknown test fault switch {name!r}; known: {known}")
        enabled = _bool(name, value)
        self.test_faults[name] = enabled
        if name in TEST_CRASH_PROPERTIES:
            return
        # Process-wide on purpose: the switches are Partition class attributes, so a test-only setting
        # needs no parameter threaded through the broker. Only `eoslog serve` subprocesses set them.
        from eoslog.cluster.partition import Partition

        setattr(Partition, TEST_FAULT_PROPERTIES[name], enabled)
