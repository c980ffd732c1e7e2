"""Per-partition questions asked of partition leaders in one request per leader: ListOffsets (one per
leader per timestamp and isolation level) and DescribeProducers. Shared by `eoslog topics describe`,
`eoslog transactions find-hanging`, `records`/`reset-offsets` and the web console.

Asking partition by partition costs a Metadata round trip (to find the leader) plus a request per
partition: 1,000 partitions took seconds. Here the leaders come from one Metadata request (or from the
caller, who often has just asked for it), and each leader gets one request naming all its partitions.

Errors stay per partition: a partition with no leader, an unknown one, or one its leader refuses is
returned in an ``errors`` map (partition -> error code) beside the answers, never hidden and never
failing the others. A leader that moved since the Metadata answers NOT_LEADER_OR_FOLLOWER, and one that
stopped cannot be reached (NETWORK_EXCEPTION): those partitions are asked once more after a fresh
Metadata, as a Kafka client would. The Metadata of a broker that has not yet heard of a stop may still
name the stopped broker as leader, so a tool run during a failover reports the partition instead of
failing as a whole. The leaders come from one Metadata and the brokers' addresses from another: a leader
that stopped in between is no longer listed, and is LEADER_NOT_AVAILABLE, asked again likewise.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from eoslog.protocol import messages
from eoslog.protocol.errors import ErrorCode
from eoslog.tools.brokers import BrokerNotInMetadata, Brokers

LIST_OFFSETS, METADATA, DESCRIBE_PRODUCERS = 2, 3, 61
READ_UNCOMMITTED = 0

TopicPartition = tuple[str, int]
ByLeader = dict[int, dict[str, list[int]]]
# The leader moved, stopped, or is no longer listed since the Metadata that named it: ask the new one.
_ASK_AGAIN = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NETWORK_EXCEPTION, ErrorCode.LEADER_NOT_AVAILABLE)


def leaders(brokers: Brokers, topics: Iterable[str] | None = None,
            include_internal: bool = True) -> dict[TopicPartition, int]:
    """Each partition's leader (-1 when it has none) from one Metadata request for ``topics`` (every
    topic when None); topics the broker does not know are left out."""
    Topic = messages.MetadataRequest.MetadataRequestTopic
    names = None if topics is None else sorted(set(topics))
    response = brokers.call(METADATA, 4, messages.MetadataRequest(
        topics=None if names is None else [Topic(name=n) for n in names], allow_auto_topic_creation=False))
    return {(t.name, p.partition_index): p.leader_id for t in response.topics
            if t.error_code == 0 and (include_internal or not t.is_internal) for p in t.partitions}


def group_by_leader(tps: Iterable[TopicPartition],
                    leader_of: dict[TopicPartition, int]) -> tuple[ByLeader, dict[TopicPartition, int]]:
    """(leader -> topic -> partitions, partition -> error code for those no leader can be asked about)."""
    grouped: ByLeader = {}
    errors = {}
    for tp in tps:
        leader = leader_of.get(tp)
        if leader is None:
            errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        elif leader < 0:
            errors[tp] = ErrorCode.LEADER_NOT_AVAILABLE
        else:
            grouped.setdefault(leader, {}).setdefault(tp[0], []).append(tp[1])
    return grouped, errors


def _each(by_topic: dict[str, list[int]], code: ErrorCode) -> dict[TopicPartition, tuple[int, object]]:
    return {(t, p): (code, None) for t, ps in by_topic.items() for p in ps}


def _at_leaders(brokers: Brokers, tps: list[TopicPartition], leader_of: dict[TopicPartition, int] | None,
                ask: Callable[[int, dict[str, list[int]]], dict[TopicPartition, tuple[int, object]]]):
    """``ask(leader, partitions by topic)`` -> partition -> (error code, answer), at every leader; then once
    more, after a fresh Metadata, for the partitions whose leader had moved or could not be reached."""
    if leader_of is None:
        leader_of = leaders(brokers, {t for t, _ in tps})
    answers, errors = {}, {}
    for attempt in range(2):
        grouped, errors_now = group_by_leader(tps, leader_of)
        errors.update(errors_now)
        moved = []
        for leader, by_topic in grouped.items():
            try:
                answered = ask(leader, by_topic)
            except OSError:  # refused, reset or timed out: the next attempt opens a new connection
                brokers.forget(leader)
                answered = _each(by_topic, ErrorCode.NETWORK_EXCEPTION)
            except BrokerNotInMetadata:  # gone between the Metadata naming it leader and the one listing brokers
                answered = _each(by_topic, ErrorCode.LEADER_NOT_AVAILABLE)
            for tp, (code, answer) in answered.items():
                if code == 0:
                    answers[tp] = answer
                    errors.pop(tp, None)
                else:
                    errors[tp] = code
                    if code in _ASK_AGAIN:
                        moved.append(tp)
        if not moved or attempt:
            break
        tps, leader_of = moved, leaders(brokers, {t for t, _ in moved})
    return answers, errors


def list_offsets(brokers: Brokers, tps: Iterable[TopicPartition], timestamp: int | dict[TopicPartition, int],
                 isolation_level: int = READ_UNCOMMITTED, leader_of: dict[TopicPartition, int] | None = None,
                 ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
    """(partition -> offset, partition -> error code): the offset for ``timestamp`` (EARLIEST, LATEST or
    milliseconds; one per partition when a dict), -1 where no record is that new; one ListOffsets per
    leader. ``leader_of`` saves the Metadata request when the caller has the leaders already."""
    Topic, Partition = messages.ListOffsetsRequest.ListOffsetsTopic, messages.ListOffsetsRequest.ListOffsetsPartition

    def ask(leader: int, by_topic: dict[str, list[int]]):
        request = messages.ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level, topics=[
            Topic(name=t, partitions=[Partition(partition_index=p, current_leader_epoch=-1, timestamp=(
                timestamp[(t, p)] if isinstance(timestamp, dict) else timestamp)) for p in ps])
            for t, ps in by_topic.items()])
        return {(t.name, p.partition_index): (p.error_code, p.offset)
                for t in brokers.node(leader).request(LIST_OFFSETS, 2, request).topics for p in t.partitions}

    return _at_leaders(brokers, list(tps), leader_of, ask)


def describe_producers(brokers: Brokers, tps: Iterable[TopicPartition],
                       leader_of: dict[TopicPartition, int] | None = None,
                       ) -> tuple[dict[TopicPartition, list], dict[TopicPartition, int]]:
    """(partition -> the producers whose state it keeps, partition -> error code); one DescribeProducers
    per leader."""
    TopicRequest = messages.DescribeProducersRequest.TopicRequest

    def ask(leader: int, by_topic: dict[str, list[int]]):
        request = messages.DescribeProducersRequest(topics=[TopicRequest(name=t, partition_indexes=ps)
                                                            for t, ps in by_topic.items()])
        return {(t.name, p.partition_index): (p.error_code, p.active_producers)
                for t in brokers.node(leader).request(DESCRIBE_PRODUCERS, 0, request).topics for p in t.partitions}

    return _at_leaders(brokers, list(tps), leader_of, ask)
