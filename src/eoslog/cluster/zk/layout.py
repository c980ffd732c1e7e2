"""Kafka's ZooKeeper layout: znode paths and their JSON, without I/O.

Every znode eoslog writes has the shape Kafka's ZooKeeper mode gave it (docs/cluster.md lists them), so
the tree reads the same to anyone who knows Kafka. Decoders accept what Kafka wrote as well as what we
write, and raise :class:`LayoutError` for anything else rather than guess.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field

CLUSTER_ID = "/cluster/id"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
CONFIG_TOPICS = "/config/topics"
CONFIG_USERS = "/config/users"
CONFIG_BROKERS = "/config/brokers"  # <id> and <default>: dynamic broker configs (server/dynamic_broker_configs.py)
CONFIG_GROUPS = "/config/groups"  # <group id>: group configs (cluster/group_configs.py); eoslog's, Kafka keeps them in KRaft
BROKER_DEFAULT_ENTITY = "<default>"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"
# Created at startup so watches and conditional writes always have a parent to hang on.
PERSISTENT_PATHS = (BROKER_IDS, BROKER_TOPICS, CONFIG_TOPICS, CONFIG_USERS, CONFIG_BROKERS, CONFIG_GROUPS, CONFIG_CHANGES,
                    "/admin/delete_topics", "/isr_change_notification")
# Kafka's ZkNodeChangeNotificationListener purges notifications older than this (changeExpirationMs).
CONFIG_CHANGE_EXPIRATION_MS = 15 * 60 * 1000

NO_LEADER = -1


class LayoutError(ValueError):
    """A znode holds something that is not what Kafka's layout says it should."""


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}/state"


def classify_path(path: str) -> tuple[str, str, int]:
    """What a watched znode is: ("topic", t, -1) for /brokers/topics/<t>, ("partitions", t, -1) for its
    partitions znode, ("topic_config", t, -1), ("state", t, p) for a partition's state znode, or
    ("other", "", -1)."""
    if path.startswith(BROKER_TOPICS + "/"):
        parts = path[len(BROKER_TOPICS) + 1:].split("/")
        if len(parts) == 1:
            return "topic", parts[0], -1
        if len(parts) == 2 and parts[1] == "partitions":
            return "partitions", parts[0], -1
        if len(parts) == 4 and parts[1] == "partitions" and parts[3] == "state" and parts[2].isdigit():
            return "state", parts[0], int(parts[2])
    elif path.startswith(CONFIG_TOPICS + "/") and "/" not in path[len(CONFIG_TOPICS) + 1:]:
        return "topic_config", path[len(CONFIG_TOPICS) + 1:], -1
    return "other", "", -1


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


def _load(data: bytes | None, what: str) -> dict:
    if not data:
        raise LayoutError(f"{what}: empty znode")
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise LayoutError(f"{what}: not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise LayoutError(f"{what}: expected a JSON object")
    return value


def _dump(value: dict) -> bytes:
    return json.dumps(value, separators=(",", ":"), sort_keys=True).encode()


# ---- /cluster/id ----------------------------------------------------------------------------------

def encode_cluster_id(cluster_id: str) -> bytes:
    return _dump({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    value = _load(data, CLUSTER_ID)
    if not isinstance(value.get("id"), str):
        raise LayoutError(f"{CLUSTER_ID}: no id")
    return value["id"]


# ---- /brokers/ids/<id> ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Endpoint:
    """One listener of a broker as registered: its name, security protocol and advertised address."""

    listener: str
    protocol: str
    host: str
    port: int

    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener}://{host}:{self.port}"


@dataclass(frozen=True)
class BrokerRegistration:
    """``/brokers/ids/<id>``: every listener the broker serves, the first one its primary.

    Written as Kafka's version 5: ``endpoints`` lists ``NAME://host:port`` for each listener and
    ``listener_security_protocol_map`` gives each name its protocol; ``host``/``port`` repeat the first
    PLAINTEXT endpoint for old readers (null and -1 when there is none, as Kafka writes them)."""

    broker_id: int
    endpoints: tuple[Endpoint, ...]
    rack: str | None = None
    # Ours, beside Kafka's fields: tells a restarted broker that a registration still in ZooKeeper is its
    # own previous life (same data directory) waiting for its session to expire, not a duplicate id.
    data_dir: str = ""
    timestamp: int = 0
    # Not in the JSON: the zxid that created this registration (ZooKeeper's czxid, Kafka's broker epoch of
    # KIP-380), -1 when not read from ZooKeeper. A new one means the broker started (or its session expired)
    # since; the controller and the broker itself compare it with a partition state's ``zxid``.
    czxid: int = field(default=-1, compare=False)
    # Ours: the broker's logs were closed cleanly before this start (every byte fsync'ed at shutdown), so a
    # restart the controller did not see cost it nothing it held. False after a crash or power loss, on a
    # new disk, and in registrations that do not say (Kafka's, older eoslog's): the cautious reading.
    clean_start: bool = False

    @classmethod
    def plaintext(cls, broker_id: int, host: str, port: int, rack: str | None = None, data_dir: str = "",
                  timestamp: int = 0) -> BrokerRegistration:
        """A broker with one PLAINTEXT listener (a single-listener cluster member; tests)."""
        return cls(broker_id, (Endpoint("PLAINTEXT", "PLAINTEXT", host, port),), rack, data_dir, timestamp)

    def endpoint(self, listener: str) -> Endpoint | None:
        return next((e for e in self.endpoints if e.listener == listener), None)

    def describe(self) -> str:
        return ",".join(e.url() for e in self.endpoints) or "no endpoints"

    def encode(self) -> bytes:
        plaintext = next((e for e in self.endpoints if e.protocol == "PLAINTEXT"), None)
        return _dump({
            "version": 5,
            "host": plaintext.host if plaintext else None,
            "port": plaintext.port if plaintext else -1,
            "endpoints": [e.url() for e in self.endpoints],
            "listener_security_protocol_map": {e.listener: e.protocol for e in self.endpoints},
            "rack": self.rack,
            "jmx_port": -1,
            "timestamp": str(self.timestamp or int(time.time() * 1000)),
            "eoslog_data_dir": self.data_dir,
            "eoslog_clean_start": self.clean_start,
        })

    @classmethod
    def decode(cls, broker_id: int, data: bytes, czxid: int = -1) -> BrokerRegistration:
        """Kafka's versions 1-5 (endpoints; a name without a map entry is its own protocol, as before
        version 3) and version 0 (host and port only: one PLAINTEXT listener)."""
        path = broker_path(broker_id)
        value = _load(data, path)
        protocols = value.get("listener_security_protocol_map") or {}
        if not isinstance(protocols, dict):
            raise LayoutError(f"{path}: listener_security_protocol_map must be an object")
        endpoints = []
        for url in value.get("endpoints") or ():
            if not isinstance(url, str):
                raise LayoutError(f"{path}: endpoints must be NAME://HOST:PORT strings")
            name, sep, address = url.partition("://")
            host, colon, port = address.rpartition(":")
            if not sep or not name or not colon or not port.isdigit():
                raise LayoutError(f"{path}: cannot read endpoint {url!r}")
            endpoints.append(Endpoint(name, str(protocols.get(name, name)), host.strip("[]"), int(port)))
        if not endpoints:
            host, port = value.get("host"), value.get("port")
            if not isinstance(host, str) or not host or not isinstance(port, int) or port < 0:
                raise LayoutError(f"{path}: no endpoints and no host and port")
            endpoints.append(Endpoint("PLAINTEXT", "PLAINTEXT", host, port))
        return cls(broker_id, tuple(endpoints), value.get("rack"), value.get("eoslog_data_dir", ""),
                   int(value.get("timestamp", 0)), czxid, value.get("eoslog_clean_start") is True)


# ---- /controller and /controller_epoch -------------------------------------------------------------

def encode_controller(broker_id: int) -> bytes:
    return _dump({"version": 1, "brokerid": broker_id, "timestamp": str(int(time.time() * 1000))})


def decode_controller(data: bytes) -> int:
    value = _load(data, CONTROLLER)
    if not isinstance(value.get("brokerid"), int):
        raise LayoutError(f"{CONTROLLER}: no brokerid")
    return value["brokerid"]


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes) -> int:
    try:
        return int(data.decode())
    except (ValueError, UnicodeDecodeError, AttributeError):
        raise LayoutError(f"{CONTROLLER_EPOCH}: not an integer: {data!r}") from None


# ---- /brokers/topics/<topic> -----------------------------------------------------------------------

@dataclass(frozen=True)
class TopicAssignment:
    """A topic's replica assignment: partition -> replicas, the first one the preferred leader."""

    name: str
    topic_id: uuid.UUID
    replicas: dict[int, tuple[int, ...]]
    # KIP-455: a reassignment in progress lists every replica, old and new, in ``replicas``; these say
    # which are being added and which will be removed once the new ones are in sync.
    adding: dict[int, tuple[int, ...]] = field(default_factory=dict)
    removing: dict[int, tuple[int, ...]] = field(default_factory=dict)

    @property
    def partition_count(self) -> int:
        return len(self.replicas)

    def target(self, partition: int) -> tuple[int, ...]:
        """The replicas a partition ends with (the current ones when no reassignment is in progress)."""
        removing = self.removing.get(partition, ())
        return tuple(r for r in self.replicas[partition] if r not in removing)

    def original(self, partition: int) -> tuple[int, ...]:
        adding = self.adding.get(partition, ())
        return tuple(r for r in self.replicas[partition] if r not in adding)

    def encode(self) -> bytes:
        return _dump({
            "version": 3,
            "topic_id": _kafka_uuid(self.topic_id),
            "partitions": {str(p): list(r) for p, r in sorted(self.replicas.items())},
            "adding_replicas": {str(p): list(r) for p, r in sorted(self.adding.items()) if r},
            "removing_replicas": {str(p): list(r) for p, r in sorted(self.removing.items()) if r},
        })

    @classmethod
    def decode(cls, name: str, data: bytes) -> TopicAssignment:
        value = _load(data, topic_path(name))
        partitions = value.get("partitions")
        if not isinstance(partitions, dict):
            raise LayoutError(f"{topic_path(name)}: no partitions")
        try:
            replicas = {int(p): tuple(int(b) for b in r) for p, r in partitions.items()}
        except (TypeError, ValueError):
            raise LayoutError(f"{topic_path(name)}: partitions must map numbers to broker lists") from None
        if sorted(replicas) != list(range(len(replicas))) or any(not r for r in replicas.values()):
            raise LayoutError(f"{topic_path(name)}: partitions must be 0..n-1, each with replicas")
        topic_id = value.get("topic_id")
        try:
            adding = {int(p): tuple(int(b) for b in r) for p, r in (value.get("adding_replicas") or {}).items()}
            removing = {int(p): tuple(int(b) for b in r) for p, r in (value.get("removing_replicas") or {}).items()}
        except (TypeError, ValueError, AttributeError):
            raise LayoutError(f"{topic_path(name)}: adding/removing replicas must map numbers to lists") from None
        return cls(name, _parse_kafka_uuid(topic_id) if topic_id else uuid.UUID(int=0), replicas, adding, removing)


def _kafka_uuid(value: uuid.UUID) -> str:
    # Kafka prints topic ids as URL-safe base64 of the 16 bytes, without padding.
    import base64

    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def _parse_kafka_uuid(text: str) -> uuid.UUID:
    import base64

    try:
        return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except ValueError:
        raise LayoutError(f"bad topic id {text!r}") from None


# ---- /brokers/topics/<topic>/partitions/<p>/state ---------------------------------------------------

@dataclass(frozen=True)
class PartitionState:
    """Leader, leader epoch and ISR of one partition, as the controller (leader, epoch) and the leader
    (ISR) last wrote them. ``zk_version`` is the znode version the next conditional write must name."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int = -1
    # Not in the JSON: the zxid of the znode's last write (ZooKeeper's mzxid), -1 when not read from it.
    # What the state says about a broker whose registration is newer (czxid above it) dates from that
    # broker's previous life: it led or was in sync with a log it may since have lost (a power loss).
    zxid: int = field(default=-1, compare=False)

    def encode(self) -> bytes:
        return _dump({
            "version": 1,
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "isr": list(self.isr),
            "controller_epoch": self.controller_epoch,
        })

    @classmethod
    def decode(cls, path: str, data: bytes, zk_version: int, zxid: int = -1) -> PartitionState:
        value = _load(data, path)
        try:
            return cls(int(value["leader"]), int(value["leader_epoch"]), tuple(int(b) for b in value["isr"]),
                       int(value["controller_epoch"]), zk_version, zxid)
        except (KeyError, TypeError, ValueError):
            raise LayoutError(f"{path}: needs leader, leader_epoch, isr and controller_epoch") from None


# ---- /config/topics/<topic> ------------------------------------------------------------------------

def encode_topic_config(configs: dict[str, str]) -> bytes:
    return _dump({"version": 1, "config": dict(configs)})


def decode_topic_config(topic: str, data: bytes | None) -> dict[str, str]:
    if not data:
        return {}
    value = _load(data, topic_config_path(topic))
    config = value.get("config", {})
    if not isinstance(config, dict):
        raise LayoutError(f"{topic_config_path(topic)}: config must be an object")
    return {str(k): str(v) for k, v in config.items()}


# ---- /config/users/<user> and /config/changes/config_change_<seq> ----------------------------------

def sanitize_entity_name(name: str) -> str:
    """A user name as a znode name, the way Kafka's ``Sanitizer`` writes it: URL-encoded, every byte
    but letters, digits and ``.-_`` as %XX (so ``/`` cannot nest and ``*`` is not a wildcard)."""
    from urllib.parse import quote

    return quote(name, safe="").replace("~", "%7E")


def desanitize_entity_name(text: str) -> str:
    from urllib.parse import unquote

    return unquote(text)


def user_config_path(user: str) -> str:
    return f"{CONFIG_USERS}/{sanitize_entity_name(user)}"


def encode_entity_config(configs: dict[str, str]) -> bytes:
    """``{"version":1,"config":{...}}``: a user's SCRAM credentials (``SCRAM-SHA-512`` ->
    ``salt=...,stored_key=...,server_key=...,iterations=N``) beside whatever else Kafka keeps there (quotas)."""
    return encode_topic_config(configs)


def decode_entity_config(path: str, data: bytes | None) -> dict[str, str]:
    if not data:
        return {}
    value = _load(data, path)
    config = value.get("config", {})
    if not isinstance(config, dict):
        raise LayoutError(f"{path}: config must be an object")
    return {str(k): str(v) for k, v in config.items()}


def encode_config_change(entity_path: str) -> bytes:
    """A change notification (Kafka's version 2): ``entity_path`` is ``users/<sanitized user>``."""
    return _dump({"version": 2, "entity_path": entity_path})


def decode_config_change(data: bytes) -> str:
    value = _load(data, CONFIG_CHANGES)
    if value.get("version") != 2 or not isinstance(value.get("entity_path"), str):
        raise LayoutError(f"{CONFIG_CHANGES}: expected version 2 with an entity_path")
    return value["entity_path"]


def user_entity_path(user: str) -> str:
    return f"users/{sanitize_entity_name(user)}"


def broker_config_path(entity: str) -> str:
    """``/config/brokers/<id>`` or ``/config/brokers/<default>`` (Kafka writes the name unsanitized)."""
    return f"{CONFIG_BROKERS}/{entity}"


def broker_entity_path(entity: str) -> str:
    return f"brokers/{entity}"


# ---- /latest_producer_id_block --------------------------------------------------------------------

@dataclass(frozen=True)
class ProducerIdBlock:
    broker_id: int
    block_start: int
    block_end: int  # inclusive, as Kafka writes it

    def encode(self) -> bytes:
        # Kafka writes the two offsets as strings.
        return _dump({"version": 1, "broker": self.broker_id, "block_start": str(self.block_start),
                      "block_end": str(self.block_end)})

    @classmethod
    def decode(cls, data: bytes | None) -> ProducerIdBlock | None:
        if not data:
            return None
        value = _load(data, LATEST_PRODUCER_ID_BLOCK)
        try:
            return cls(int(value["broker"]), int(value["block_start"]), int(value["block_end"]))
        except (KeyError, TypeError, ValueError):
            raise LayoutError(f"{LATEST_PRODUCER_ID_BLOCK}: needs broker, block_start and block_end") from None


@dataclass
class ClusterView:
    """Everything a broker knows of the cluster from ZooKeeper at one moment (the metadata cache's data)."""

    brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    controller_id: int = -1
    topics: dict[str, TopicAssignment] = field(default_factory=dict)
    configs: dict[str, dict[str, str]] = field(default_factory=dict)
    states: dict[tuple[str, int], PartitionState] = field(default_factory=dict)
    # Topics whose znodes could not be read this time: nothing is concluded about them (no deletion).
    unreadable_topics: set[str] = field(default_factory=set)


def group_config_path(group_id: str) -> str:
    return f"{CONFIG_GROUPS}/{sanitize_entity_name(group_id)}"


def group_entity_path(group_id: str) -> str:
    return f"groups/{sanitize_entity_name(group_id)}"
