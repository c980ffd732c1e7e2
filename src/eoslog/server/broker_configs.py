"""A broker's configs as DescribeConfigs lists them, and which of them (Incremental)AlterConfigs may change.

Pure: a BrokerConfig in, entries out (no I/O), so api/describe_configs.py and api/incremental_alter_configs.py
stay thin. Names, sources and types are Kafka's (DescribeConfigsResponse's ConfigSource and ConfigType):

- every property eoslog implements is listed (server/config.py's tables; a Kafka property eoslog accepts and
  ignores is not, nor are test-only switches), with its effective value;
- STATIC_BROKER_CONFIG when the properties file, ``--set`` or a ``serve`` flag gave it (itself or one of its
  synonyms, e.g. ``log.retention.hours`` for ``log.retention.ms``), DEFAULT_CONFIG otherwise;
- DYNAMIC_BROKER_CONFIG / DYNAMIC_DEFAULT_BROKER_CONFIG for the dynamic configs
  (server/dynamic_broker_configs.py), the only entries that are not read-only;
- passwords and key material are sensitive: their value is null, as in Kafka;
- an alter of any other property eoslog implements is refused with Kafka's words ("Cannot update these
  configs dynamically"), never accepted and ignored;
- a Kafka broker property eoslog does not use (server/kafka_broker_properties.py) is accepted where Kafka
  accepts it: at start, and in an alter when Kafka's update mode allows it (not read-only; a per-broker one
  not at the cluster-wide level). It is kept and listed, as it was given, with a note that eoslog ignores it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from eoslog.cluster.topic_configs import TOPIC_CONFIGS
from eoslog.protocol.errors import InvalidConfigError, InvalidRequestError
from eoslog.server import config as broker_config
from eoslog.server.config import BrokerConfig

# ConfigSource (DescribeConfigsResponse)
DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 2, 3, 4, 5
# ConfigType
BOOLEAN, STRING, INT, LONG, DOUBLE, LIST, CLASS, PASSWORD = 1, 2, 3, 5, 6, 7, 8, 9

INT_MAX = str(2**31 - 1)  # Kafka's "no limit" for max.connections and max.connections.per.ip


@dataclass(frozen=True)
class Synonym:
    name: str
    value: str | None
    source: int


@dataclass(frozen=True)
class BrokerConfigEntry:
    name: str
    value: str | None  # None for a sensitive entry, and for one that has no value (an unset ssl.* path)
    source: int
    config_type: int
    sensitive: bool
    read_only: bool = True
    synonyms: tuple[Synonym, ...] = field(default=())
    documentation: str | None = None


def _optional(value) -> str | None:
    return None if value is None else str(value)


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _listeners(config: BrokerConfig) -> str:
    return ",".join(f"{lst.name}://{lst.host}:{lst.port}" for lst in config.listeners())


def _advertised_listeners(config: BrokerConfig) -> str | None:
    if config.advertised_listeners_spec is not None:
        return config.advertised_listeners_spec
    host, port = config.advertised
    return f"{config.listeners()[0].name}://{host}:{port}"


# property -> (value of a config, ConfigType) for the properties that are neither a plain integer
# (config._SIMPLE_INTS), a log default (config.LOG_DEFAULTS) nor a security property.
_OTHER: dict[str, tuple[Callable[[BrokerConfig], str | None], int]] = {
    "queued.max.request.bytes": (lambda c: str(c.request_memory_capacity), LONG),
    "max.connections.per.ip.overrides": (
        lambda c: ",".join(f"{k}:{v}" for k, v in c.max_connections_per_ip_overrides.items()), STRING),
    "auto.create.topics.enable": (lambda c: _bool(c.auto_create_topics_enable), BOOLEAN),
    "unclean.leader.election.enable": (lambda c: _bool(c.unclean_leader_election_enable), BOOLEAN),
    "auto.leader.rebalance.enable": (lambda c: _bool(c.auto_leader_rebalance_enable), BOOLEAN),
    "zookeeper.connect": (lambda c: c.zookeeper_connect, STRING),
    "broker.rack": (lambda c: c.broker_rack, STRING),
    "log.cleaner.enable": (lambda c: _bool(c.log_cleaner_enable), BOOLEAN),
    "log.cleaner.process": (lambda c: _bool(c.log_cleaner_process), BOOLEAN),
    "eoslog.log.flush.syncfs": (lambda c: _bool(c.log_flush_syncfs), BOOLEAN),
    "log.dirs": (lambda c: str(c.data_dir), STRING),
    "log.dir": (lambda c: str(c.data_dir), STRING),
    "listeners": (_listeners, STRING),
    "advertised.listeners": (_advertised_listeners, STRING),
    "listener.security.protocol.map": (
        lambda c: None if c.listener_protocol_map is None
        else ",".join(f"{k}:{v}" for k, v in c.listener_protocol_map.items()), STRING),
    "inter.broker.listener.name": (lambda c: c.inter_broker_listener().name, STRING),
    "security.inter.broker.protocol": (lambda c: c.inter_broker_listener().protocol, STRING),
    "authorizer.class.name": (lambda c: c.authorizer_class_name, CLASS),
    "super.users": (lambda c: ";".join(sorted(c.super_users)), STRING),
    "allow.everyone.if.no.acl.found": (lambda c: _bool(c.allow_everyone_if_no_acl_found), BOOLEAN),
    "cluster.id": (lambda c: c.cluster_id, STRING),
    "eoslog.metrics.listen": (
        lambda c: None if c.metrics_listen is None else f"{c.metrics_listen[0]}:{c.metrics_listen[1]}", STRING),
    "eoslog.console.listen": (
        lambda c: None if c.console_listen is None else f"{c.console_listen[0]}:{c.console_listen[1]}", STRING),
    "eoslog.console.allow.writes": (lambda c: _bool(c.console_allow_writes), BOOLEAN),
    "eoslog.console.command.config": (lambda c: c.console_command_config, STRING),
    "eoslog.schema.registry.listen": (lambda c: None if c.schema_registry_listen is None else
                                      ("https://" if c.schema_registry_https else "")
                                      + f"{c.schema_registry_listen[0]}:{c.schema_registry_listen[1]}", STRING),
    "eoslog.schema.registry.basic.auth": (lambda c: _bool(c.schema_registry_basic_auth), BOOLEAN),
    "eoslog.schema.registry.authorization": (lambda c: _bool(c.schema_registry_authorization), BOOLEAN),
    "eoslog.schema.registry.command.config": (lambda c: c.schema_registry_command_config, STRING),
    "eoslog.schema.validation.topic": (lambda c: c.schema_validation_topic, STRING),
    "group.consumer.assignors": (lambda c: ",".join(c.group_consumer_assignors), LIST),
    "eoslog.share.persist.acquisitions": (lambda c: _bool(c.share_persist_acquisitions), BOOLEAN),
}
_NULL_WHEN_UNSET = {"max.connections": INT_MAX, "max.connections.per.ip": INT_MAX}


def _sensitive(name: str) -> bool:
    """Passwords and key material: Kafka's PASSWORD type, never sent back."""
    return name.endswith((".password", "sasl.jaas.config", ".key")) or "keystore.key" in name


def _synonyms_of(name: str) -> list[str]:
    """The names that set the same thing, strongest first (Kafka: log.retention.ms before .minutes, .hours)."""
    aliases = [alias for alias, (target, _) in broker_config._TIME_ALIASES.items() if target == name]
    return [name, *sorted(aliases, key=lambda a: broker_config._TIME_ALIASES[a][1])]


def _value_and_type(config: BrokerConfig, name: str) -> tuple[str | None, int]:
    if name in broker_config.LOG_DEFAULTS:
        topic_name = broker_config.LOG_DEFAULTS[name]
        default, config_type = TOPIC_CONFIGS[topic_name]
        return config.log_defaults.get(topic_name, default), config_type
    if name in broker_config._SIMPLE_INTS:
        value = getattr(config, broker_config._SIMPLE_INTS[name][0])
        if value is None:
            return _NULL_WHEN_UNSET.get(name), INT
        return str(value), LONG if name.endswith(".ms") or name == "log.cleaner.dedupe.buffer.size" else INT
    if name in _OTHER:
        getter, config_type = _OTHER[name]
        return getter(config), config_type
    # security properties (ssl.*, sasl.*, listener.name.<listener>.*)
    if name in config.security_properties:
        return config.security_properties[name], PASSWORD if _sensitive(name) else STRING
    if name == "sasl.enabled.mechanisms":
        return broker_config.DEFAULT_SASL_MECHANISMS, LIST
    return None, PASSWORD if _sensitive(name) else STRING


def implemented_properties(config: BrokerConfig) -> list[str]:
    """Every property this broker lists, in name order: what config.py implements, plus the per-listener
    security properties this broker was given."""
    from eoslog.server.tls import SSL_PROPERTIES

    names = {*broker_config.LOG_DEFAULTS, *broker_config._SIMPLE_INTS, *_OTHER, *SSL_PROPERTIES,
             *broker_config.SASL_PROPERTIES}
    names |= {n for n in config.security_properties if n.startswith("listener.name.")}
    return sorted(names)


def describe_broker_configs(config: BrokerConfig, keys: Iterable[str] | None = None,
                            include_synonyms: bool = False, cluster_id: str | None = None,
                            dynamic=None) -> list[BrokerConfigEntry]:
    """This broker's entries (only ``keys`` when given, as DescribeConfigs' configuration_keys);
    ``cluster_id`` is the one in force (meta.properties or ZooKeeper) when the config names none;
    ``dynamic`` the broker's DynamicBrokerConfigs (None: nothing is dynamic)."""
    from eoslog.server.dynamic_broker_configs import DYNAMIC_PROPERTIES

    if cluster_id is not None and config.cluster_id is None:
        config = replace(config, cluster_id=cluster_id)
    wanted = None if keys is None else set(keys)
    entries = []
    for name in implemented_properties(config):
        if wanted is not None and name not in wanted:
            continue
        value, config_type = _value_and_type(config, name)
        sensitive = _sensitive(name)
        # Kafka's order of synonyms: the one in force first, the default last
        found = [] if dynamic is None else [
            Synonym(name, level[name], source) for level, source in (
                (dynamic.per_broker, DYNAMIC_BROKER_CONFIG), (dynamic.default, DYNAMIC_DEFAULT_BROKER_CONFIG))
            if name in level]
        found += [Synonym(s, None if sensitive else config.originals[s], STATIC_BROKER_CONFIG)
                  for s in _synonyms_of(name) if s in config.originals]
        source = found[0].source if found else DEFAULT_CONFIG
        synonyms: tuple[Synonym, ...] = ()
        if include_synonyms:
            default = _value_and_type(BrokerConfig(), name)[0] if found else value
            synonyms = (*found, *([Synonym(name, None if sensitive else default, DEFAULT_CONFIG)]
                                  if default is not None else []))
        entries.append(BrokerConfigEntry(name=name, value=None if sensitive else value, source=source,
                                         config_type=config_type, sensitive=sensitive, synonyms=synonyms,
                                         read_only=dynamic is None or name not in DYNAMIC_PROPERTIES))
    entries += _ignored_entries(config, wanted, include_synonyms, dynamic)
    return sorted(entries, key=lambda e: e.name)


def _ignored_entries(config: BrokerConfig, wanted: set[str] | None, include_synonyms: bool,
                     dynamic) -> list[BrokerConfigEntry]:
    """The Kafka broker properties this broker was given but does not use, as given: dynamic levels
    first, then the properties file; each with a note that eoslog ignores it."""
    from eoslog.server.kafka_broker_properties import IGNORED_NOTE, config_type, is_sensitive

    levels = [] if dynamic is None else [(dynamic.per_broker, DYNAMIC_BROKER_CONFIG),
                                         (dynamic.default, DYNAMIC_DEFAULT_BROKER_CONFIG)]
    levels.append((config.ignored_properties, STATIC_BROKER_CONFIG))
    names = {n for level, _ in levels for n in level if broker_config.is_ignored_kafka_property(n)}
    entries = []
    for name in sorted(names):
        if wanted is not None and name not in wanted:
            continue
        sensitive = is_sensitive(name)
        found = [Synonym(name, None if sensitive else level[name], source) for level, source in levels
                 if name in level]
        entries.append(BrokerConfigEntry(
            name=name, value=found[0].value, source=found[0].source, config_type=config_type(name),
            sensitive=sensitive, read_only=dynamic is None or not keeps_dynamically(name),
            synonyms=tuple(found) if include_synonyms else (), documentation=IGNORED_NOTE))
    return entries


def keeps_dynamically(name: str) -> bool:
    """A Kafka broker property eoslog does not use, that Kafka lets an alter change (not read-only), and
    whose value is no secret (eoslog does not keep a password it has no use for)."""
    from eoslog.server.kafka_broker_properties import KAFKA_BROKER_PROPERTIES

    known = KAFKA_BROKER_PROPERTIES.get(name)
    return (known is not None and known.dynamic and known.type != "password"
            and broker_config.is_ignored_kafka_property(name))


def describe_default_configs(dynamic, keys: Iterable[str] | None = None) -> list[BrokerConfigEntry]:
    """The cluster-wide default resource (""): only the dynamic defaults set, as in Kafka."""
    wanted = None if keys is None else set(keys)
    if dynamic is None:
        return []
    from eoslog.server.kafka_broker_properties import IGNORED_NOTE, config_type

    def entry(name: str, value: str) -> BrokerConfigEntry:
        ignored = broker_config.is_ignored_kafka_property(name)
        return BrokerConfigEntry(
            name=name, value=value, source=DYNAMIC_DEFAULT_BROKER_CONFIG,
            config_type=config_type(name) if ignored else _value_and_type(BrokerConfig(), name)[1],
            sensitive=False, read_only=False, synonyms=(Synonym(name, value, DYNAMIC_DEFAULT_BROKER_CONFIG),),
            documentation=IGNORED_NOTE if ignored else None)

    return [entry(name, value) for name, value in sorted(dynamic.default.items()) if wanted is None or name in wanted]


def check_broker_resource(config: BrokerConfig, resource_name: str) -> bool:
    """True for this broker's id, False for "" (the cluster-wide default resource); anything else is
    refused as Kafka refuses it: a client sends a broker's configs request to that broker."""
    if resource_name == "":
        return False
    try:
        broker_id = int(resource_name)
    except ValueError:
        raise InvalidRequestError(f"Broker id must be an integer, but it is: {resource_name}") from None
    if broker_id != config.node_id:
        raise InvalidRequestError(f"Unexpected broker id, expected {config.node_id} or empty string, "
                                  f"but received {resource_name}")
    return True


def check_alterable(config: BrokerConfig, names: Iterable[str], dynamic=None, cluster_default: bool = False) -> None:
    """Raises unless every name is a dynamic config of this broker (``dynamic``: the broker's
    DynamicBrokerConfigs), or a Kafka broker property eoslog keeps without using it that Kafka lets an
    alter change. An unknown name is INVALID_CONFIG naming the closest known ones; a static one is Kafka's
    INVALID_REQUEST "Cannot update these configs dynamically" naming the ones that are; a per-broker Kafka
    property at the cluster-wide level (``cluster_default``) is Kafka's INVALID_REQUEST too."""
    from eoslog.server.dynamic_broker_configs import DYNAMIC_PROPERTIES
    from eoslog.server.kafka_broker_properties import KAFKA_BROKER_PROPERTIES, PER_BROKER

    names = list(dict.fromkeys(names))
    known = implemented_properties(config)
    for name in names:
        if name not in known and not broker_config.is_ignored_kafka_property(name):
            import difflib  # only for a mistyped name's hint

            close = difflib.get_close_matches(name, [*known, *KAFKA_BROKER_PROPERTIES], n=3, cutoff=0.6)
            hint = f"; closest: {', '.join(close)}" if close else ""
            raise InvalidConfigError(f"unknown broker config {name!r}{hint}")
    static = [name for name in names
              if dynamic is None or (name not in DYNAMIC_PROPERTIES and not keeps_dynamically(name))]
    if static:
        reason = (f"the dynamic ones are {', '.join(DYNAMIC_PROPERTIES)}" if dynamic is not None else
                  "this broker has no dynamic configs")
        raise InvalidRequestError(
            f"Cannot update these configs dynamically: {', '.join(static)} ({reason}; set the others in the "
            "properties file or with --set, and restart the broker)")
    per_broker = [name for name in names if name in KAFKA_BROKER_PROPERTIES and name not in DYNAMIC_PROPERTIES
                  and KAFKA_BROKER_PROPERTIES[name].update_mode == PER_BROKER]
    if cluster_default and per_broker:
        raise InvalidRequestError("Cannot update these configs at default cluster level, broker id must be "
                                  f"specified: {', '.join(per_broker)}")
