"""Apache Kafka 4.1's broker properties: each name with its type and its update mode, as Kafka's broker
config reference lists them (read-only, per-broker, cluster-wide). Data, no I/O.

Why eoslog keeps Kafka's list: a Kafka tool may set any of these, at start (a stock server.properties) or
through (Incremental)AlterConfigs, and Kafka accepts them. eoslog implements some (server/config.py); the
others it accepts and ignores, so that such a tool works, while a name in neither list is refused as a
typo with the closest known name. An alter follows Kafka's update modes: a read-only property cannot be
changed while the broker runs, a per-broker one not at the cluster-wide default level.
"""

from __future__ import annotations

from typing import NamedTuple

READ_ONLY, PER_BROKER, CLUSTER_WIDE = "read-only", "per-broker", "cluster-wide"
IGNORED_NOTE = "An Apache Kafka broker config: eoslog keeps its value but does not use it."

# name, type, update mode (r read-only, p per-broker, c cluster-wide)
_TABLE = """
add.partitions.to.txn.retry.backoff.max.ms                  int      r
add.partitions.to.txn.retry.backoff.ms                      int      r
advertised.listeners                                        string   r
alter.config.policy.class.name                              class    r
alter.log.dirs.replication.quota.window.num                 int      r
alter.log.dirs.replication.quota.window.size.seconds        int      r
authorizer.class.name                                       string   r
auto.create.topics.enable                                   boolean  r
auto.leader.rebalance.enable                                boolean  r
background.threads                                          int      c
broker.heartbeat.interval.ms                                int      r
broker.id                                                   int      r
broker.rack                                                 string   r
broker.session.timeout.ms                                   int      r
client.quota.callback.class                                 class    r
compression.gzip.level                                      int      c
compression.lz4.level                                       int      c
compression.type                                            string   c
compression.zstd.level                                      int      c
connection.failed.authentication.delay.ms                   int      r
connections.max.idle.ms                                     long     r
connections.max.reauth.ms                                   long     r
controlled.shutdown.enable                                  boolean  r
controller.listener.names                                   string   r
controller.quorum.append.linger.ms                          int      r
controller.quorum.bootstrap.servers                         list     r
controller.quorum.election.backoff.max.ms                   int      r
controller.quorum.election.timeout.ms                       int      r
controller.quorum.fetch.timeout.ms                          int      r
controller.quorum.request.timeout.ms                        int      r
controller.quorum.retry.backoff.ms                          int      r
controller.quorum.voters                                    list     r
controller.quota.window.num                                 int      r
controller.quota.window.size.seconds                        int      r
controller.socket.timeout.ms                                int      r
create.topic.policy.class.name                              class    r
default.replication.factor                                  int      r
delegation.token.expiry.check.interval.ms                   long     r
delegation.token.expiry.time.ms                             long     r
delegation.token.max.lifetime.ms                            long     r
delegation.token.secret.key                                 password r
delete.records.purgatory.purge.interval.requests            int      r
delete.topic.enable                                         boolean  r
early.start.listeners                                       string   r
fetch.max.bytes                                             int      r
fetch.purgatory.purge.interval.requests                     int      r
group.consumer.assignors                                    list     r
group.consumer.heartbeat.interval.ms                        int      r
group.consumer.max.heartbeat.interval.ms                    int      r
group.consumer.max.session.timeout.ms                       int      r
group.consumer.max.size                                     int      r
group.consumer.migration.policy                             string   r
group.consumer.min.heartbeat.interval.ms                    int      r
group.consumer.min.session.timeout.ms                       int      r
group.consumer.session.timeout.ms                           int      r
group.coordinator.append.linger.ms                          int      r
group.coordinator.rebalance.protocols                       list     r
group.coordinator.threads                                   int      r
group.initial.rebalance.delay.ms                            int      r
group.max.session.timeout.ms                                int      r
group.max.size                                              int      r
group.min.session.timeout.ms                                int      r
group.share.assignors                                       list     r
group.share.delivery.count.limit                            int      r
group.share.heartbeat.interval.ms                           int      r
group.share.max.heartbeat.interval.ms                       int      r
group.share.max.record.lock.duration.ms                     int      r
group.share.max.session.timeout.ms                          int      r
group.share.max.share.sessions                              int      r
group.share.max.size                                        int      r
group.share.min.heartbeat.interval.ms                       int      r
group.share.min.record.lock.duration.ms                     int      r
group.share.min.session.timeout.ms                          int      r
group.share.partition.max.record.locks                      int      r
group.share.record.lock.duration.ms                         int      r
group.share.session.timeout.ms                              int      r
group.streams.heartbeat.interval.ms                         int      r
group.streams.max.heartbeat.interval.ms                     int      r
group.streams.max.session.timeout.ms                        int      r
group.streams.max.size                                      int      r
group.streams.max.standby.replicas                          int      r
group.streams.min.heartbeat.interval.ms                     int      r
group.streams.min.session.timeout.ms                        int      r
group.streams.num.standby.replicas                          int      r
group.streams.session.timeout.ms                            int      r
initial.broker.registration.timeout.ms                      int      r
inter.broker.listener.name                                  string   r
kafka.metrics.polling.interval.secs                         int      r
kafka.metrics.reporters                                     list     r
leader.imbalance.check.interval.seconds                     long     r
listener.security.protocol.map                              string   p
listeners                                                   string   p
log.cleaner.backoff.ms                                      long     c
log.cleaner.dedupe.buffer.size                              long     c
log.cleaner.delete.retention.ms                             long     c
log.cleaner.enable                                          boolean  r
log.cleaner.io.buffer.load.factor                           double   c
log.cleaner.io.buffer.size                                  int      c
log.cleaner.io.max.bytes.per.second                         double   c
log.cleaner.max.compaction.lag.ms                           long     c
log.cleaner.min.cleanable.ratio                             double   c
log.cleaner.min.compaction.lag.ms                           long     c
log.cleaner.threads                                         int      c
log.cleanup.policy                                          list     c
log.dir                                                     string   r
log.dir.failure.timeout.ms                                  long     r
log.dirs                                                    string   r
log.flush.interval.messages                                 long     c
log.flush.interval.ms                                       long     c
log.flush.offset.checkpoint.interval.ms                     int      r
log.flush.scheduler.interval.ms                             long     r
log.flush.start.offset.checkpoint.interval.ms               int      r
log.index.interval.bytes                                    int      c
log.index.size.max.bytes                                    int      c
log.local.retention.bytes                                   long     c
log.local.retention.ms                                      long     c
log.message.timestamp.after.max.ms                          long     c
log.message.timestamp.before.max.ms                         long     c
log.message.timestamp.type                                  string   c
log.preallocate                                             boolean  c
log.retention.bytes                                         long     c
log.retention.check.interval.ms                             long     r
log.retention.hours                                         int      r
log.retention.minutes                                       int      r
log.retention.ms                                            long     c
log.roll.hours                                              int      r
log.roll.jitter.hours                                       int      r
log.roll.jitter.ms                                          long     c
log.roll.ms                                                 long     c
log.segment.bytes                                           int      c
log.segment.delete.delay.ms                                 long     c
max.connection.creation.rate                                int      c
max.connections                                             int      c
max.connections.per.ip                                      int      c
max.connections.per.ip.overrides                            string   c
max.incremental.fetch.session.cache.slots                   int      r
max.request.partition.size.limit                            int      r
message.max.bytes                                           int      c
metadata.log.dir                                            string   r
metadata.log.max.record.bytes.between.snapshots             long     r
metadata.log.max.snapshot.interval.ms                       long     r
metadata.log.segment.bytes                                  int      r
metadata.log.segment.ms                                     long     r
metadata.max.idle.interval.ms                               int      r
metadata.max.retention.bytes                                long     r
metadata.max.retention.ms                                   long     r
metric.reporters                                            list     c
metrics.num.samples                                         int      r
metrics.recording.level                                     string   r
metrics.sample.window.ms                                    long     r
min.insync.replicas                                         int      c
node.id                                                     int      r
num.io.threads                                              int      c
num.network.threads                                         int      c
num.partitions                                              int      r
num.recovery.threads.per.data.dir                           int      c
num.replica.alter.log.dirs.threads                          int      r
num.replica.fetchers                                        int      c
offset.metadata.max.bytes                                   int      r
offsets.commit.timeout.ms                                   int      r
offsets.load.buffer.size                                    int      r
offsets.retention.check.interval.ms                         long     r
offsets.retention.minutes                                   int      r
offsets.topic.compression.codec                             int      r
offsets.topic.num.partitions                                int      r
offsets.topic.replication.factor                            short    r
offsets.topic.segment.bytes                                 int      r
principal.builder.class                                     class    p
process.roles                                               list     r
producer.id.expiration.ms                                   int      c
producer.purgatory.purge.interval.requests                  int      r
queued.max.request.bytes                                    long     r
queued.max.requests                                         int      r
quota.window.num                                            int      r
quota.window.size.seconds                                   int      r
remote.fetch.max.wait.ms                                    int      c
remote.list.offsets.request.timeout.ms                      long     c
remote.log.index.file.cache.total.size.bytes                long     c
remote.log.manager.copier.thread.pool.size                  int      c
remote.log.manager.copy.max.bytes.per.second                long     c
remote.log.manager.copy.quota.window.num                    int      r
remote.log.manager.copy.quota.window.size.seconds           int      r
remote.log.manager.expiration.thread.pool.size              int      c
remote.log.manager.fetch.max.bytes.per.second               long     c
remote.log.manager.fetch.quota.window.num                   int      r
remote.log.manager.fetch.quota.window.size.seconds          int      r
remote.log.manager.task.interval.ms                         long     r
remote.log.manager.thread.pool.size                         int      r
remote.log.metadata.custom.metadata.max.bytes               int      r
remote.log.metadata.manager.class.name                      string   r
remote.log.metadata.manager.class.path                      string   r
remote.log.metadata.manager.impl.prefix                     string   r
remote.log.metadata.manager.listener.name                   string   r
remote.log.reader.max.pending.tasks                         int      r
remote.log.reader.threads                                   int      c
remote.log.storage.manager.class.name                       string   r
remote.log.storage.manager.class.path                       string   r
remote.log.storage.manager.impl.prefix                      string   r
remote.log.storage.system.enable                            boolean  r
replica.fetch.backoff.ms                                    int      r
replica.fetch.max.bytes                                     int      r
replica.fetch.min.bytes                                     int      r
replica.fetch.response.max.bytes                            int      r
replica.fetch.wait.max.ms                                   int      r
replica.high.watermark.checkpoint.interval.ms               long     r
replica.lag.time.max.ms                                     long     r
replica.selector.class                                      string   r
replica.socket.receive.buffer.bytes                         int      r
replica.socket.timeout.ms                                   int      r
replication.quota.window.num                                int      r
replication.quota.window.size.seconds                       int      r
request.timeout.ms                                          int      r
sasl.client.callback.handler.class                          class    r
sasl.enabled.mechanisms                                     list     p
sasl.jaas.config                                            password p
sasl.kerberos.kinit.cmd                                     string   p
sasl.kerberos.min.time.before.relogin                       long     p
sasl.kerberos.principal.to.local.rules                      list     p
sasl.kerberos.service.name                                  string   p
sasl.kerberos.ticket.renew.jitter                           double   p
sasl.kerberos.ticket.renew.window.factor                    double   p
sasl.login.callback.handler.class                           class    r
sasl.login.class                                            class    r
sasl.login.connect.timeout.ms                               int      r
sasl.login.read.timeout.ms                                  int      r
sasl.login.refresh.buffer.seconds                           short    p
sasl.login.refresh.min.period.seconds                       short    p
sasl.login.refresh.window.factor                            double   p
sasl.login.refresh.window.jitter                            double   p
sasl.login.retry.backoff.max.ms                             long     r
sasl.login.retry.backoff.ms                                 long     r
sasl.mechanism.controller.protocol                          string   r
sasl.mechanism.inter.broker.protocol                        string   p
sasl.oauthbearer.assertion.algorithm                        string   r
sasl.oauthbearer.assertion.claim.aud                        string   r
sasl.oauthbearer.assertion.claim.exp.seconds                int      r
sasl.oauthbearer.assertion.claim.iss                        string   r
sasl.oauthbearer.assertion.claim.jti.include                boolean  r
sasl.oauthbearer.assertion.claim.nbf.seconds                int      r
sasl.oauthbearer.assertion.claim.sub                        string   r
sasl.oauthbearer.assertion.file                             string   r
sasl.oauthbearer.assertion.private.key.file                 string   r
sasl.oauthbearer.assertion.private.key.passphrase           password r
sasl.oauthbearer.assertion.template.file                    string   r
sasl.oauthbearer.client.credentials.client.id               string   r
sasl.oauthbearer.client.credentials.client.secret           password r
sasl.oauthbearer.clock.skew.seconds                         int      r
sasl.oauthbearer.expected.audience                          list     r
sasl.oauthbearer.expected.issuer                            string   r
sasl.oauthbearer.jwks.endpoint.refresh.ms                   long     r
sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms         long     r
sasl.oauthbearer.jwks.endpoint.retry.backoff.ms             long     r
sasl.oauthbearer.jwks.endpoint.url                          string   r
sasl.oauthbearer.jwt.retriever.class                        class    r
sasl.oauthbearer.jwt.validator.class                        class    r
sasl.oauthbearer.scope                                      string   r
sasl.oauthbearer.scope.claim.name                           string   r
sasl.oauthbearer.sub.claim.name                             string   r
sasl.oauthbearer.token.endpoint.url                         string   r
sasl.server.callback.handler.class                          class    r
sasl.server.max.receive.size                                int      r
security.inter.broker.protocol                              string   r
security.providers                                          string   r
share.coordinator.append.linger.ms                          int      r
share.coordinator.load.buffer.size                          int      r
share.coordinator.snapshot.update.records.per.snapshot      int      r
share.coordinator.state.topic.compression.codec             int      r
share.coordinator.state.topic.min.isr                       short    r
share.coordinator.state.topic.num.partitions                int      r
share.coordinator.state.topic.replication.factor            short    r
share.coordinator.state.topic.segment.bytes                 int      r
share.coordinator.threads                                   int      r
share.coordinator.write.timeout.ms                          int      r
share.fetch.purgatory.purge.interval.requests               int      r
socket.connection.setup.timeout.max.ms                      long     r
socket.connection.setup.timeout.ms                          long     r
socket.listen.backlog.size                                  int      r
socket.receive.buffer.bytes                                 int      r
socket.request.max.bytes                                    int      r
socket.send.buffer.bytes                                    int      r
ssl.allow.dn.changes                                        boolean  r
ssl.allow.san.changes                                       boolean  r
ssl.cipher.suites                                           list     p
ssl.client.auth                                             string   p
ssl.enabled.protocols                                       list     p
ssl.endpoint.identification.algorithm                       string   p
ssl.engine.factory.class                                    class    p
ssl.key.password                                            password p
ssl.keymanager.algorithm                                    string   p
ssl.keystore.certificate.chain                              password p
ssl.keystore.key                                            password p
ssl.keystore.location                                       string   p
ssl.keystore.password                                       password p
ssl.keystore.type                                           string   p
ssl.principal.mapping.rules                                 string   r
ssl.protocol                                                string   p
ssl.provider                                                string   p
ssl.secure.random.implementation                            string   p
ssl.trustmanager.algorithm                                  string   p
ssl.truststore.certificates                                 password p
ssl.truststore.location                                     string   p
ssl.truststore.password                                     password p
ssl.truststore.type                                         string   p
telemetry.max.bytes                                         int      r
transaction.abort.timed.out.transaction.cleanup.interval.ms int      r
transaction.max.timeout.ms                                  int      r
transaction.partition.verification.enable                   boolean  c
transaction.remove.expired.transaction.cleanup.interval.ms  int      r
transaction.state.log.load.buffer.size                      int      r
transaction.state.log.min.isr                               int      r
transaction.state.log.num.partitions                        int      r
transaction.state.log.replication.factor                    short    r
transaction.state.log.segment.bytes                         int      r
transaction.two.phase.commit.enable                         boolean  r
transactional.id.expiration.ms                              int      r
unclean.leader.election.enable                              boolean  c
"""

_MODES = {"r": READ_ONLY, "p": PER_BROKER, "c": CLUSTER_WIDE}


class KafkaProperty(NamedTuple):
    type: str  # ConfigDef's type name: int, long, short, double, boolean, string, list, class, password
    update_mode: str  # READ_ONLY, PER_BROKER or CLUSTER_WIDE

    @property
    def dynamic(self) -> bool:
        return self.update_mode != READ_ONLY


KAFKA_BROKER_PROPERTIES: dict[str, KafkaProperty] = {
    name: KafkaProperty(type_, _MODES[mode])
    for name, type_, mode in (line.split() for line in _TABLE.strip().splitlines())
}

# DescribeConfigs' ConfigType of each ConfigDef type
_CONFIG_TYPES = {"boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7, "class": 8,
                 "password": 9}


def config_type(name: str) -> int:
    """DescribeConfigs' ConfigType of a Kafka property (STRING for a name Kafka does not have)."""
    known = KAFKA_BROKER_PROPERTIES.get(name)
    return _CONFIG_TYPES[known.type] if known is not None else _CONFIG_TYPES["string"]


def is_sensitive(name: str) -> bool:
    known = KAFKA_BROKER_PROPERTIES.get(name)
    return known is not None and known.type == "password"


_BOUNDS = {"short": 2**15, "int": 2**31, "long": 2**63}


def value_error(name: str, value: str) -> str | None:
    """Why ``value`` is not of the property's type (Kafka's ConfigDef parse), or None when it is."""
    known = KAFKA_BROKER_PROPERTIES.get(name)
    if known is None:
        return None
    text = value.strip()
    if known.type in _BOUNDS:
        try:
            number = int(text)
        except ValueError:
            return f"Invalid value {value} for configuration {name}: Not a number of type {known.type.upper()}"
        bound = _BOUNDS[known.type]
        if not -bound <= number < bound:
            return f"Invalid value {value} for configuration {name}: Not a number of type {known.type.upper()}"
    elif known.type == "double":
        try:
            float(text)
        except ValueError:
            return f"Invalid value {value} for configuration {name}: Not a number of type DOUBLE"
    elif known.type == "boolean" and text.lower() not in ("true", "false"):
        return f"Invalid value {value} for configuration {name}: Expected value to be either true or false"
    return None
