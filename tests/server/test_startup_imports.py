"""`eoslog serve` imports only what a single node needs before it accepts connections (issues 16 and 36).

A fresh interpreter imports the serve path, or starts a broker up to its open port, and the tests name the
heavy packages that must not be among its modules; each is imported later by whatever first needs it
(cluster mode, a tool, a client library, a coordinator's first load, the log cleaner once serving).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SERVE_PATH = ("eoslog.cli", "eoslog.server.run")

NOT_ON_SERVE_PATH = (
    "kafka",          # kafka-python: only its JSON spec files are read (eoslog.protocol.schema)
    "kazoo",          # cluster mode only
    "eoslog.cluster.service",
    "importlib.metadata",  # via the crc32c package's __init__ (eoslog.records.checksum loads its extension)
    "eoslog.api.produce",    # handler modules load on their API's first request (eoslog.api.HANDLERS)
    "eoslog.api.join_group",
    "prometheus_client",     # only with --metrics-listen / eoslog.metrics.listen (server/metrics.py)
    "eoslog.server.metrics",
    "starlette",             # the web console: only with --console-listen / eoslog.console.listen
    "uvicorn",
    "jinja2",
    "eoslog.console",
    "eoslog.server.console",
    "eoslog.schema_registry",  # the schema registry: only with --schema-registry-listen
    "eoslog.server.schema_registry",
    "avro",
    "jsonschema",
    "google.protobuf",
    "confluent_kafka",
    # Coordinators: built when this broker first leads one of their internal partitions, and loaded in
    # the background once the port is open (coordinator/runtime.py).
    "eoslog.coordinator.group",
    "eoslog.coordinator.transaction.shard",
    "eoslog.coordinator.transaction.engine",
    "eoslog.coordinator.transaction.decisions",
    "eoslog.coordinator.transaction.markers",
    "eoslog.coordinator.transaction.apis",
    "eoslog.coordinator.transaction_groups",
    "eoslog.coordinator.check_back",
    "eoslog.coordinator.share",
    "eoslog.log.cleaner",        # started on the loop's first turn after the port is announced
    "eoslog.log.cleaner_pass",
    "eoslog.log.cleaner_worker",
    "eoslog.cluster.replica_fetcher",  # followers only: a cluster's
    "ctypes.util",           # its find_library runs `ldconfig -p` in a child process (log/syncfs.py)
    "cramjam",               # the first compressed batch the broker itself reads or writes
)

# A broker started as `eoslog serve` starts it, stopped the moment Broker.start() returns (its port open and
# announced, the loop not yet turned); prints the modules loaded then. Internal topics of one partition each,
# so that a second start over the same directory finds partitions for every coordinator to load.
UNTIL_LISTENING = """\
import json, sys
from pathlib import Path

import eoslog.cli
from eoslog.server.broker import Broker
from eoslog.server.config import BrokerConfig
from eoslog.server.run import new_event_loop

async def until_listening():
    config = BrokerConfig(data_dir=Path(sys.argv[1]), listen_host="127.0.0.1", listen_port=0)
    config.apply_properties({"offsets.topic.num.partitions": "1", "transaction.state.log.num.partitions": "1",
                             "share.coordinator.state.topic.num.partitions": "1"})
    broker = Broker(config)
    await broker.start()
    loaded = sorted(sys.modules)
    for topic in ("__consumer_offsets", "__transaction_state", "__share_group_state"):
        broker.coordinator_runtime.ensure_topic(topic)
    await broker.stop()
    return loaded

print(json.dumps(new_event_loop().run_until_complete(until_listening())))
"""


def _offenders(loaded: set[str]) -> list[str]:
    return sorted(m for m in loaded for bad in NOT_ON_SERVE_PATH if m == bad or m.startswith(bad + "."))


def test_serve_path_does_not_import_heavy_packages() -> None:
    code = (
        "import importlib, json, sys\n"
        f"for name in {SERVE_PATH!r}: importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    loaded = set(json.loads(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                                           text=True).stdout))
    assert _offenders(loaded) == []


def test_a_broker_listens_before_loading_coordinators_and_the_cleaner(tmp_path: Path) -> None:
    """Also over a directory holding the internal topics: their coordinators load only after the port."""
    for start in ("new directory", "internal topics led here"):
        loaded = set(json.loads(subprocess.run([sys.executable, "-c", UNTIL_LISTENING, str(tmp_path)], check=True,
                                               capture_output=True, text=True).stdout))
        assert _offenders(loaded) == [], start
    for topic in ("__consumer_offsets", "__transaction_state", "__share_group_state"):
        assert (tmp_path / f"{topic}-0").is_dir(), topic


def test_advertised_versions_match_the_handler_modules() -> None:
    """eoslog.api.APIS is a copy of each handler module's constants, kept so that ApiVersions can answer
    without importing them all; the copy must say what the modules say, and name every module."""
    import importlib
    import pkgutil

    from eoslog import api

    # The modules of api/ that are not handlers: errors.py (refusals shared by handlers) and context.py
    # (what every handler is given).
    names = {m.name for m in pkgutil.iter_modules(api.__path__) if not m.name.startswith("_")} - {"errors", "context"}
    assert names == set(api.APIS)
    for name, (key, low, high) in api.APIS.items():
        module = importlib.import_module(f"eoslog.api.{name}")
        assert (module.API_KEY, module.MIN_VERSION, module.MAX_VERSION) == (key, low, high), name
        assert api.HANDLERS[key] is module
    assert len({key for key, _, _ in api.APIS.values()}) == len(api.APIS)
