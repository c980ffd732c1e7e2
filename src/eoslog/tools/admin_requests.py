"""The admin requests behind `eoslog topics`, `configs`, `records` and `groups reset-offsets`, each sent
where Kafka serves it (tools/brokers.py): topic creation, deletion and new partitions to the controller,
a broker's configs to that broker, offsets and record deletion to each partition's leader. Request
versions are ones Kafka serves from 2.4 on and still serves in 4.x (KIP-896 removed only older ones), so
the tools work against any Kafka-compatible broker.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import click

from eoslog.protocol import messages
from eoslog.tools import leader_requests
from eoslog.tools.brokers import Brokers
from eoslog.tools.common import check, closest, error_name

LIST_OFFSETS, METADATA, DELETE_RECORDS, CREATE_TOPICS, DELETE_TOPICS = 2, 3, 21, 19, 20
DESCRIBE_CONFIGS, CREATE_PARTITIONS, INCREMENTAL_ALTER_CONFIGS = 32, 37, 44
TOPIC, BROKER = 2, 4  # config resource types
SET, DELETE = 0, 1  # IncrementalAlterConfigs operations
EARLIEST, LATEST = -2, -1  # ListOffsets timestamps
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
CONFIG_SOURCES = {1: "topic", 2: "dynamic-broker", 3: "dynamic-default-broker", 4: "static-broker",
                  5: "default", 6: "dynamic-broker-logger"}
TIMEOUT_MS = 30_000

TopicPartition = tuple[str, int]


def _controller(brokers: Brokers):
    """Kafka accepts topic changes only at its controller; a single eoslog node is its own."""
    controller_id = brokers.metadata(refresh=True).controller_id
    return brokers.node(controller_id).request if controller_id >= 0 else brokers.call


# ---- topics -------------------------------------------------------------------------------------

@dataclass
class PartitionView:
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]
    offline: list[int]
    log_start_offset: int | None = None
    high_watermark: int | None = None
    last_stable_offset: int | None = None
    error: str | None = None  # why its leader gave no offsets (topics describe)


@dataclass
class TopicView:
    name: str
    internal: bool
    partitions: list[PartitionView] = field(default_factory=list)
    configs: dict[str, str] = field(default_factory=dict)  # set on the topic itself (not defaults)

    @property
    def replication_factor(self) -> int:
        return max((len(p.replicas) for p in self.partitions), default=0)


def topics(brokers: Brokers, names: list[str] | None = None) -> list[TopicView]:
    """Metadata for the named topics (every topic when None); an unknown name is an error. Version 5,
    the first with offline replicas."""
    Topic = messages.MetadataRequest.MetadataRequestTopic
    response = brokers.call(METADATA, 5, messages.MetadataRequest(
        topics=None if names is None else [Topic(name=n) for n in names], allow_auto_topic_creation=False))
    views = []
    for t in response.topics:
        check(t.error_code, f"topic {t.name}")
        views.append(TopicView(t.name, t.is_internal, sorted(
            (PartitionView(p.partition_index, p.leader_id, list(p.replica_nodes), list(p.isr_nodes),
                           list(p.offline_replicas or [])) for p in t.partitions), key=lambda p: p.partition)))
    return sorted(views, key=lambda v: v.name)


def create_topic(brokers: Brokers, name: str, partitions: int, replication_factor: int,
                 configs: dict[str, str], validate_only: bool = False):
    request = messages.CreateTopicsRequest(timeout_ms=TIMEOUT_MS, validate_only=validate_only, topics=[
        messages.CreateTopicsRequest.CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=replication_factor, assignments=[],
            configs=[messages.CreateTopicsRequest.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])])
    [result] = _controller(brokers)(CREATE_TOPICS, 5, request).topics
    return result


def delete_topic(brokers: Brokers, name: str):
    request = messages.DeleteTopicsRequest(topic_names=[name], timeout_ms=TIMEOUT_MS)
    [result] = _controller(brokers)(DELETE_TOPICS, 4, request).responses
    check(result.error_code, f"DeleteTopics {name}", result.error_message)


def create_partitions(brokers: Brokers, name: str, count: int) -> None:
    request = messages.CreatePartitionsRequest(timeout_ms=TIMEOUT_MS, validate_only=False, topics=[
        messages.CreatePartitionsRequest.CreatePartitionsTopic(name=name, count=count, assignments=None)])
    [result] = _controller(brokers)(CREATE_PARTITIONS, 1, request).results
    check(result.error_code, f"CreatePartitions {name}", result.error_message)


# ---- configs ------------------------------------------------------------------------------------

@dataclass
class ConfigEntry:
    name: str
    value: str | None
    source: str
    read_only: bool
    sensitive: bool


def _config_call(brokers: Brokers, resource_type: int, name: str):
    if resource_type == BROKER and name:  # "" (the cluster-wide defaults) goes to any broker
        if not name.isdigit():
            raise click.ClickException(f"a broker is named by its id, got {name!r}")
        return brokers.node(int(name)).request
    return brokers.call


def describe_configs(brokers: Brokers, resource_type: int, name: str) -> list[ConfigEntry]:
    request = messages.DescribeConfigsRequest(include_synonyms=False, include_documentation=False, resources=[
        messages.DescribeConfigsRequest.DescribeConfigsResource(resource_type=resource_type, resource_name=name,
                                                                configuration_keys=None)])
    [result] = _config_call(brokers, resource_type, name)(DESCRIBE_CONFIGS, 1, request).results
    kind = "topic" if resource_type == TOPIC else "broker"
    check(result.error_code, f"DescribeConfigs {kind} {name}", result.error_message)
    return sorted((ConfigEntry(c.name, c.value, CONFIG_SOURCES.get(c.config_source, str(c.config_source)),
                               c.read_only, c.is_sensitive) for c in result.configs), key=lambda c: c.name)


def check_config_names(names: list[str], valid: list[str] | None, what: str) -> None:
    """An unknown name is refused before anything is sent, with the names it was probably meant to be;
    no check when the broker could not say which names it knows."""
    for name in names:
        if valid and name not in valid:
            raise click.ClickException(f"unknown config {name!r} for {what}; {closest(name, valid)}")


def valid_topic_config_names(brokers: Brokers, topic: str | None = None) -> list[str] | None:
    """The names the broker lists for a topic (this one, or any existing one); None when it has no
    topic to ask about yet (then the broker alone judges, see ``unknown_topic_config``)."""
    candidates = [topic] if topic else [t.name for t in topics(brokers)][:1]
    for name in candidates:
        try:
            return [c.name for c in describe_configs(brokers, TOPIC, name)]
        except click.ClickException:
            continue
    return None


def unknown_topic_config(names: list[str], what: str) -> None:
    """After a broker refused configs it could not be asked about beforehand: a name outside Kafka's
    topic configs (eoslog's list) gets the closest of those. Kafka has a few more names than eoslog, so
    this runs only once the broker has said no."""
    from eoslog.cluster.topic_configs import TOPIC_CONFIGS

    check_config_names(names, sorted(TOPIC_CONFIGS), what)


def alter_configs(brokers: Brokers, resource_type: int, name: str, set_: dict[str, str],
                  delete: list[str], validate_only: bool = False) -> None:
    Alterable = messages.IncrementalAlterConfigsRequest.AlterableConfig
    operations = [Alterable(name=k, config_operation=SET, value=v) for k, v in set_.items()]
    operations += [Alterable(name=k, config_operation=DELETE, value=None) for k in delete]
    request = messages.IncrementalAlterConfigsRequest(validate_only=validate_only, resources=[
        messages.IncrementalAlterConfigsRequest.AlterConfigsResource(
            resource_type=resource_type, resource_name=name, configs=operations)])
    [result] = _config_call(brokers, resource_type, name)(INCREMENTAL_ALTER_CONFIGS, 0, request).responses
    kind = "topic" if resource_type == TOPIC else "broker"
    check(result.error_code, f"altering {kind} {name}", result.error_message)


# ---- offsets and records ------------------------------------------------------------------------

def list_offsets(brokers: Brokers, tps: list[TopicPartition], timestamp: int | dict[TopicPartition, int],
                 isolation_level: int = READ_UNCOMMITTED) -> dict[TopicPartition, int]:
    """ListOffsets, one per leader (tools/leader_requests.py): the offset for ``timestamp`` (EARLIEST,
    LATEST or milliseconds; one per partition when a dict), -1 where no record is that new. Any
    partition's error fails the call, naming that partition."""
    offsets, errors = leader_requests.list_offsets(brokers, tps, timestamp, isolation_level)
    for t, p in sorted(errors):
        check(errors[(t, p)], f"ListOffsets {t}-{p}")
    return offsets


def delete_records(brokers: Brokers, before: dict[TopicPartition, int]) -> dict[TopicPartition, tuple[int, str]]:
    """DeleteRecords at each leader: (new log start offset, error name or "") per partition."""
    Topic, Partition = messages.DeleteRecordsRequest.DeleteRecordsTopic, messages.DeleteRecordsRequest.DeleteRecordsPartition
    grouped, errors = leader_requests.group_by_leader(before, leader_requests.leaders(brokers, {t for t, _ in before}))
    out = {tp: (-1, error_name(code)) for tp, code in errors.items()}
    for leader, by_topic in grouped.items():
        request = messages.DeleteRecordsRequest(timeout_ms=TIMEOUT_MS, topics=[
            Topic(name=t, partitions=[Partition(partition_index=p, offset=before[(t, p)]) for p in ps])
            for t, ps in by_topic.items()])
        for t in brokers.node(leader).request(DELETE_RECORDS, 1, request).topics:
            for p in t.partitions:
                out[(t.name, p.partition_index)] = (p.low_watermark, error_name(p.error_code) if p.error_code else "")
    return out
