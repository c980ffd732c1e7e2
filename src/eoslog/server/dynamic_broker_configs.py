"""Dynamic broker configs: the few properties an admin may change while the broker runs.

Contract
- Only DYNAMIC_PROPERTIES change at run time, none of which weakens a guarantee: the connection limits,
  for the next connection accepted (one already open is never closed for them, as in Kafka), and the
  retention and segment defaults of the logs whose topics do not set their own, which every such log
  takes at once (retention then runs on its usual schedule). Every other broker property stays read-only
  (server/broker_configs.py refuses it).
- Two levels, as Kafka's: this broker's own (resource "<id>") and the cluster-wide default (resource "");
  the value in force is this broker's, else the default's, else the static one (properties file, --set),
  else eoslog's default.
- Persisted before it is applied, so an acknowledged change survives a restart and a failed write changes
  nothing: on a single node in the data directory (DYNAMIC_CONFIG_FILE, written whole and atomically, in
  the shape of Kafka's znodes: ``{"version": 1, "brokers": {"0": {...}, "<default>": {...}}}``); on a
  cluster in ZooKeeper's ``/config/brokers/<id>`` and ``/config/brokers/<default>``, announced under
  ``/config/changes`` as Kafka does (cluster/broker_configs_zk.py), so every broker applies a default.
- Called on the event loop only.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

from eoslog.protocol.errors import InvalidConfigError
from eoslog.server.config import LOG_DEFAULTS, BrokerConfig, ConfigError

log = logging.getLogger(__name__)

DYNAMIC_CONFIG_FILE = "dynamic-broker-configs.json"
FORMAT_VERSION = 1
DEFAULT_ENTITY = "<default>"  # Kafka's znode name for the cluster-wide default
# property -> BrokerConfig attribute
CONNECTION_PROPERTIES = {
    "max.connections": "max_connections",
    "max.connections.per.ip": "max_connections_per_ip",
    "max.connections.per.ip.overrides": "max_connections_per_ip_overrides",
}
# broker log defaults -> the topic config each is the default of (config.LOG_DEFAULTS): every log whose
# topic does not set its own takes the new value at once, as Kafka's dynamic log defaults do
LOG_PROPERTIES = {name: LOG_DEFAULTS[name] for name in (
    "log.retention.ms", "log.retention.bytes", "log.segment.bytes", "log.roll.ms")}
DYNAMIC_PROPERTIES = [*CONNECTION_PROPERTIES, *LOG_PROPERTIES]

Change = Callable[[dict[str, str]], dict[str, str]]


class DynamicBrokerConfigs:
    def __init__(self, config: BrokerConfig, quotas,
                 on_log_defaults: Callable[[dict[str, str], dict[str, int]], None] | None = None) -> None:
        self.config = config
        self.quotas = quotas  # server/limits.py ConnectionQuotas: where the connection limits are read
        # given the topic-level defaults in force after a change (the registry re-configures its logs)
        self.on_log_defaults = on_log_defaults
        self._static = {name: getattr(config, attribute) for name, attribute in CONNECTION_PROPERTIES.items()}
        self._static_log_defaults = dict(config.log_defaults)
        self._log_sources: dict[str, int] = {}
        self.per_broker: dict[str, str] = {}
        self.default: dict[str, str] = {}
        # (entity, change) -> persisted; set by use_file or by the cluster's ZooKeeper copy
        self._write: Callable[[str, Change], Awaitable[None]] | None = None

    @property
    def entity(self) -> str:
        return str(self.config.node_id)

    # ---- where they are kept ------------------------------------------------------------------------------

    def use_file(self, data_dir: Path) -> None:
        """A single node: reads DYNAMIC_CONFIG_FILE (none: nothing set) and applies it; an unreadable file
        or an invalid value stops the start."""
        path = Path(data_dir) / DYNAMIC_CONFIG_FILE
        brokers = _read_file(path)
        try:
            self.replace_levels(brokers.get(self.entity, {}), brokers.get(DEFAULT_ENTITY, {}), strict=True)
        except InvalidConfigError as exc:
            raise ConfigError(f"{path}: {exc}") from None

        async def write(entity: str, change: Change) -> None:
            from eoslog.log.checkpoint import write_atomically

            brokers = _read_file(path)  # other ids' entries are kept: a directory moved between ids loses nothing
            brokers[entity] = change(brokers.get(entity, {}))
            write_atomically(path, json.dumps({"version": FORMAT_VERSION, "brokers": {
                k: v for k, v in brokers.items() if v}}, indent=1, sort_keys=True).encode())
            levels = brokers.get(self.entity, {}), brokers.get(DEFAULT_ENTITY, {})
            self.replace_levels(*levels, strict=True)

        self._write = write

    def use_store(self, write: Callable[[str, Change], Awaitable[None]]) -> None:
        """A cluster: ``write`` persists in ZooKeeper and returns once this broker has read it back
        (replace_levels is called by the reader, on this broker and every other)."""
        self._write = write

    # ---- reads and writes ---------------------------------------------------------------------------------

    def configs_of(self, default: bool) -> dict[str, str]:
        return dict(self.default if default else self.per_broker)

    async def alter(self, default: bool, change: Change, validate_only: bool = False) -> None:
        """Applies ``change`` to one level's whole set (per broker, or the default): checked, persisted,
        then applied."""
        def checked(current: dict[str, str]) -> dict[str, str]:
            wanted = change(dict(current))
            self.check(wanted)
            return wanted

        if validate_only or self._write is None:
            checked(self.configs_of(default))
            if self._write is None:
                raise InvalidConfigError("this broker has no store for dynamic configs")
            return
        await self._write(DEFAULT_ENTITY if default else self.entity, checked)

    def replace_levels(self, per_broker: dict[str, str], default: dict[str, str], strict: bool = False) -> None:
        """Both levels as read from where they are kept. ``strict`` (a file at start) raises on an invalid
        entry; otherwise (ZooKeeper, written by any tool) it is left out with an error logged, as Kafka does."""
        levels = []
        for level, where in ((per_broker, self.entity), (default, DEFAULT_ENTITY)):
            kept = {}
            for name, value in level.items():
                try:
                    self.check({name: value})
                    kept[name] = value
                except InvalidConfigError as exc:
                    if strict:
                        raise
                    log.error("ignoring dynamic broker config %s=%s of %s: %s", name, value, where, exc)
            levels.append(kept)
        self.per_broker, self.default = levels
        self._apply()

    def source_of(self, name: str) -> tuple[str, bool] | None:
        """(value, is the default level) of the dynamic value in force for ``name``, None if none is set."""
        if name in self.per_broker:
            return self.per_broker[name], False
        if name in self.default:
            return self.default[name], True
        return None

    def check(self, configs: dict[str, str]) -> None:
        """Every name dynamic and every value one that the properties file would take. A Kafka broker
        property eoslog keeps without using it (server/broker_configs.py keeps_dynamically) needs only a
        value of its type."""
        from eoslog.server.broker_configs import keeps_dynamically
        from eoslog.server.kafka_broker_properties import value_error

        scratch = replace(self.config, originals={}, log_defaults=dict(self.config.log_defaults))
        for name, value in configs.items():
            if keeps_dynamically(name):
                error = value_error(name, value)
                if error is not None:
                    raise InvalidConfigError(error)
                continue
            if name not in DYNAMIC_PROPERTIES:
                raise InvalidConfigError(f"{name} is not a dynamic broker config")
            try:
                scratch.set_property(name, value)
            except ConfigError as exc:
                raise InvalidConfigError(str(exc)) from None
        try:  # the log defaults as a whole, as a new topic would get them
            from eoslog.log.config import LogConfig

            LogConfig.from_properties(scratch.log_defaults)
        except ValueError as exc:
            raise InvalidConfigError(str(exc)) from None

    def _apply(self) -> None:
        scratch = replace(self.config, originals={}, log_defaults=dict(self._static_log_defaults))
        for name, attribute in CONNECTION_PROPERTIES.items():
            setattr(scratch, attribute, self._static[name])
            found = self.source_of(name)
            if found is not None:
                scratch.set_property(name, found[0])  # checked when it was read
            setattr(self.config, attribute, getattr(scratch, attribute))
        sources = {}  # topic config -> DescribeConfigs source (2: this broker's, 3: the default)
        for name, topic_name in LOG_PROPERTIES.items():
            found = self.source_of(name)
            if found is not None:
                scratch.set_property(name, found[0])
                sources[topic_name] = 3 if found[1] else 2
        if scratch.log_defaults != self.config.log_defaults or sources != self._log_sources:
            self.config.log_defaults, self._log_sources = scratch.log_defaults, sources
            if self.on_log_defaults is not None:
                self.on_log_defaults(dict(scratch.log_defaults), sources)
        self.quotas.max_connections = self.config.max_connections
        self.quotas.max_per_ip = self.config.max_connections_per_ip
        self.quotas.per_ip_overrides = dict(self.config.max_connections_per_ip_overrides)


def _read_file(path: Path) -> dict[str, dict[str, str]]:
    if not path.exists():
        return {}
    try:
        document = json.loads(path.read_bytes())
        brokers = document["brokers"]
        if document.get("version") != FORMAT_VERSION or not isinstance(brokers, dict):
            raise ValueError(f"expected version {FORMAT_VERSION} with a brokers object")
        return {str(entity): {str(k): str(v) for k, v in level.items()} for entity, level in brokers.items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"{path}: unreadable dynamic broker configs ({exc}); fix or remove it") from None
