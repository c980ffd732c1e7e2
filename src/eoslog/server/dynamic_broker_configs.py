"""Dynamic broker configs on a single node: the few properties an admin may change while the broker runs.

Contract
- Only DYNAMIC_PROPERTIES change at run time: the connection limits, which take effect for the next
  connection accepted and weaken no guarantee (a connection already open is never closed for them, as in
  Kafka). Every other broker property stays read-only (server/broker_configs.py refuses it).
- Two levels, as Kafka's: this broker's own (resource "<id>") and the cluster-wide default (resource "");
  the value in force is this broker's, else the default's, else the static one (properties file, --set),
  else eoslog's default.
- Persisted in the data directory (DYNAMIC_CONFIG_FILE, written whole and atomically) before it is
  applied in memory, so an acknowledged change survives a restart and a failed write changes nothing.
  The file has the shape of Kafka's ``/config/brokers/<id>`` znodes:
  ``{"version": 1, "brokers": {"0": {"max.connections": "100"}, "<default>": {...}}}``.
- On a cluster Kafka keeps these in ZooKeeper (``/config/brokers``) and announces them under
  ``/config/changes``; eoslog does not implement that yet, so a cluster broker has no dynamic configs.
- Called on the event loop only.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from eoslog.protocol.errors import InvalidConfigError
from eoslog.server.config import BrokerConfig, ConfigError

DYNAMIC_CONFIG_FILE = "dynamic-broker-configs.json"
FORMAT_VERSION = 1
DEFAULT_ENTITY = "<default>"  # Kafka's znode name for the cluster-wide default
# property -> BrokerConfig attribute
DYNAMIC_PROPERTIES = {
    "max.connections": "max_connections",
    "max.connections.per.ip": "max_connections_per_ip",
    "max.connections.per.ip.overrides": "max_connections_per_ip_overrides",
}


class DynamicBrokerConfigs:
    def __init__(self, config: BrokerConfig, data_dir: Path, quotas) -> None:
        self.config = config
        self.path = Path(data_dir) / DYNAMIC_CONFIG_FILE
        self.quotas = quotas  # server/limits.py ConnectionQuotas: where the connection limits are read
        self._static = {name: getattr(config, attribute) for name, attribute in DYNAMIC_PROPERTIES.items()}
        self.per_broker: dict[str, str] = {}
        self.default: dict[str, str] = {}

    @property
    def entity(self) -> str:
        return str(self.config.node_id)

    def load(self) -> None:
        """Reads the file (none: nothing set) and applies it; an unreadable file stops the start."""
        if not self.path.exists():
            return
        try:
            document = json.loads(self.path.read_bytes())
            brokers = document["brokers"]
            if document.get("version") != FORMAT_VERSION or not isinstance(brokers, dict):
                raise ValueError(f"expected version {FORMAT_VERSION} with a brokers object")
            per_broker = {str(k): str(v) for k, v in brokers.get(self.entity, {}).items()}
            default = {str(k): str(v) for k, v in brokers.get(DEFAULT_ENTITY, {}).items()}
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ConfigError(f"{self.path}: unreadable dynamic broker configs ({exc}); fix or remove it") from None
        try:
            self._check(per_broker)
            self._check(default)
        except InvalidConfigError as exc:
            raise ConfigError(f"{self.path}: {exc}") from None
        self.per_broker, self.default = per_broker, default
        self._apply()

    def configs_of(self, default: bool) -> dict[str, str]:
        return dict(self.default if default else self.per_broker)

    def replace_configs(self, default: bool, configs: dict[str, str], validate_only: bool = False) -> None:
        """Sets one level's whole set (IncrementalAlterConfigs computes it from the current one): checked,
        written, then applied."""
        self._check(configs)
        if validate_only:
            return
        per_broker, default_level = (self.per_broker, dict(configs)) if default else (dict(configs), self.default)
        self._write(per_broker, default_level)
        self.per_broker, self.default = per_broker, default_level
        self._apply()

    def source_of(self, name: str) -> tuple[str, bool] | None:
        """(value, is the default level) of the dynamic value in force for ``name``, None if none is set."""
        if name in self.per_broker:
            return self.per_broker[name], False
        if name in self.default:
            return self.default[name], True
        return None

    # ---- inside ------------------------------------------------------------------------------------------

    def _check(self, configs: dict[str, str]) -> None:
        """Every name dynamic and every value one that the properties file would take."""
        scratch = replace(self.config, originals={}, log_defaults=dict(self.config.log_defaults))
        for name, value in configs.items():
            if name not in DYNAMIC_PROPERTIES:
                raise InvalidConfigError(f"{name} is not a dynamic broker config")
            try:
                scratch.set_property(name, value)
            except ConfigError as exc:
                raise InvalidConfigError(str(exc)) from None

    def _write(self, per_broker: dict[str, str], default: dict[str, str]) -> None:
        from eoslog.cluster.topics import write_atomically

        brokers = {}
        if self.path.exists():  # other ids' entries are kept: a data directory moved between ids loses nothing
            brokers = {k: v for k, v in json.loads(self.path.read_bytes()).get("brokers", {}).items()
                       if k not in (self.entity, DEFAULT_ENTITY)}
        brokers.update({k: v for k, v in ((self.entity, per_broker), (DEFAULT_ENTITY, default)) if v})
        write_atomically(self.path, json.dumps({"version": FORMAT_VERSION, "brokers": brokers}, indent=1,
                                               sort_keys=True).encode())

    def _apply(self) -> None:
        scratch = replace(self.config, originals={}, log_defaults=dict(self.config.log_defaults))
        for name, attribute in DYNAMIC_PROPERTIES.items():
            setattr(scratch, attribute, self._static[name])
            found = self.source_of(name)
            if found is not None:
                scratch.set_property(name, found[0])  # checked when it was set
            setattr(self.config, attribute, getattr(scratch, attribute))
        self.quotas.max_connections = self.config.max_connections
        self.quotas.max_per_ip = self.config.max_connections_per_ip
        self.quotas.per_ip_overrides = dict(self.config.max_connections_per_ip_overrides)
