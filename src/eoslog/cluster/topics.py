"""The topic registry: which topics exist, their ids, partition counts and configs.

Contract
- Persisted as ``topics.json`` in the data directory, replaced atomically (temp file, fsync, rename,
  fsync the directory) before a change is acknowledged: prepare -> log -> apply.
- Topic names follow Kafka's rules (``[a-zA-Z0-9._-]``, at most 249 characters, not ``.`` or ``..``).
- Only the broker's event-loop thread calls it.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from eoslog.log.checkpoint import write_atomically
from eoslog.protocol.errors import (
    InvalidPartitionsError,
    InvalidTopicError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)

REGISTRY_FILE = "topics.json"
MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
CONSUMER_OFFSETS = "__consumer_offsets"
TRANSACTION_STATE = "__transaction_state"
SHARE_GROUP_STATE = "__share_group_state"
INTERNAL_TOPICS = frozenset({CONSUMER_OFFSETS, TRANSACTION_STATE, SHARE_GROUP_STATE})


def validate_topic_name(name: str | None) -> str:
    if not name:
        raise InvalidTopicError("topic name is empty")
    if name in (".", ".."):
        raise InvalidTopicError(f"topic name {name!r} is not allowed")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidTopicError(f"topic name is {len(name)} characters long; the limit is {MAX_NAME_LENGTH}")
    if not _LEGAL.match(name):
        raise InvalidTopicError(f"topic name {name!r} has characters other than ASCII letters, digits, '.', '_' and '-'")
    return name


@dataclass(frozen=True)
class InternalTopic:
    """An internal topic a coordinator keeps its state in (its name among INTERNAL_TOPICS), created on
    first use: how many partitions; the log configs it gets on top of the compaction every internal topic
    has (cluster/topic_configs.py); and, on a cluster, how many replicas and its min.insync.replicas
    (a sole broker has one replica of everything, so neither is written for it)."""

    name: str
    partitions: int
    replication_factor: int = 1
    configs: dict[str, str] = field(default_factory=dict)
    min_insync_replicas: int | None = None


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


class TopicRegistry:
    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / REGISTRY_FILE
        self.topics: dict[str, TopicInfo] = {}
        self.by_id: dict[uuid.UUID, TopicInfo] = {}
        if self._path.exists():
            for entry in json.loads(self._path.read_text()):
                info = TopicInfo(entry["name"], uuid.UUID(entry["topic_id"]), entry["partitions"], entry["configs"])
                self.topics[info.name] = info
                self.by_id[info.topic_id] = info

    def get(self, name: str) -> TopicInfo | None:
        return self.topics.get(name)

    def require(self, name: str) -> TopicInfo:
        info = self.topics.get(name)
        if info is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        return info

    def _persist(self, topics: dict[str, TopicInfo]) -> None:
        payload = [
            {"name": t.name, "topic_id": str(t.topic_id), "partitions": t.partitions, "configs": t.configs}
            for t in sorted(topics.values(), key=lambda t: t.name)
        ]
        write_atomically(self._path, json.dumps(payload, indent=1).encode())

    def create(self, name: str, partitions: int, configs: dict[str, str] | None = None) -> TopicInfo:
        validate_topic_name(name)
        if name in self.topics:
            raise TopicAlreadyExistsError(f"topic {name!r} already exists")
        if partitions < 1:
            raise InvalidPartitionsError(f"a topic needs at least one partition, got {partitions}")
        info = TopicInfo(name, uuid.uuid4(), partitions, dict(configs or {}))
        self._persist({**self.topics, name: info})
        self.topics[name] = info
        self.by_id[info.topic_id] = info
        return info

    def delete(self, name: str) -> TopicInfo:
        info = self.require(name)
        remaining = dict(self.topics)
        del remaining[name]
        self._persist(remaining)
        del self.topics[name]
        del self.by_id[info.topic_id]
        return info

    def set_partitions(self, name: str, count: int) -> TopicInfo:
        info = self.require(name)
        if count <= info.partitions:
            raise InvalidPartitionsError(
                f"topic {name!r} has {info.partitions} partitions; the new count {count} must be larger"
            )
        updated = TopicInfo(info.name, info.topic_id, count, dict(info.configs))
        self._persist({**self.topics, name: updated})
        info.partitions = count
        return info

    def set_configs(self, name: str, configs: dict[str, str]) -> TopicInfo:
        info = self.require(name)
        updated = TopicInfo(info.name, info.topic_id, info.partitions, dict(configs))
        self._persist({**self.topics, name: updated})
        info.configs = dict(configs)
        return info
