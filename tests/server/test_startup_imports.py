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
    # The codec and the first requests' handlers: loaded by the broker's warm-up on the loop's first turn
    # after the port is announced (server/dispatcher.py warm_up), or by a request that comes sooner.
    "eoslog.protocol.codec",
    "eoslog.protocol.messages",
    "eoslog.protocol.schema",
    "eoslog.api.api_versions",
    "eoslog.api.metadata",
    "eoslog.cluster.admin",  # the first admin request (PartitionRegistry.admin)
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


# Loaded after `eoslog serve` opens its port (issue 36): the codec (and the first APIs' handlers) by the
# broker's warm-up on the loop's next turn (server/dispatcher.py), the rest by whatever first needs them.
AFTER_THE_PORT = (
    "click",                          # a plain `serve` command line is parsed without it (server/serve_command.py)
    "eoslog.cli",
    "eoslog.protocol.codec",          # the specs and their generated decoders: the warm-up's
    "eoslog.protocol.messages",
    "eoslog.protocol.schema",
    "eoslog.protocol.specialised",
    "eoslog.cluster.admin",           # the admin APIs' first request (PartitionRegistry.admin)
    # A new data directory has no partition: their code (the Log, its segments, producer state, record
    # batches) loads with the first one, or with the warm-up.
    "eoslog.cluster.partition",
    "eoslog.log.log",
    "eoslog.log.producer_state",
    "eoslog.records.batch",
    "eoslog.security.acl",            # the ACL types: an authorizer that keeps ACLs, or the first request's
    "encodings.idna",                 # uvloop's encoding of a host name (server/listeners.py bind_host)
    "eoslog.security.scram",          # a credentials file to read, or the first SCRAM request
    "eoslog.server.broker_configs",   # the first DescribeConfigs / AlterConfigs of the BROKER resource
    "eoslog.server.tls",              # TLS listeners only
    "eoslog.server.kafka_broker_properties",  # a Kafka property eoslog does not implement, when one is set
)


def _imported_before(stderr: str, marker: str) -> set[str]:
    """The modules `-X importtime` reported before the first stderr line holding ``marker``."""
    loaded = set()
    for line in stderr.splitlines():
        if marker in line:
            return loaded
        if line.startswith("import time:") and "|" in line:
            loaded.add(line.rsplit("|", 1)[1].strip())
    raise AssertionError(f"{marker!r} not in the broker's output:\n{stderr[-3000:]}")


def test_serve_opens_its_port_before_loading_the_codec_and_click(tmp_path: Path) -> None:
    """`python -X importtime -m eoslog serve` as the tests and the bench start it: the modules imported
    before its "ready on" line (logged when the listener accepts connections, before the port file is
    written) include none of AFTER_THE_PORT nor NOT_ON_SERVE_PATH; the first Metadata is answered."""
    from confluent_kafka.admin import AdminClient

    from eoslog.testing.wait import wait_until

    port_file, stderr_file = tmp_path / "port", tmp_path / "stderr"
    with stderr_file.open("w") as stderr:
        broker = subprocess.Popen(
            [sys.executable, "-X", "importtime", "-m", "eoslog", "serve", "--data-dir", str(tmp_path / "data"),
             "--listen", "127.0.0.1:0", "--port-file", str(port_file), "--set", "group.initial.rebalance.delay.ms=0"],
            stdout=subprocess.DEVNULL, stderr=stderr)
        try:
            wait_until(lambda: port_file.exists() or broker.poll() is not None, timeout=60, what="the port file")
            assert broker.poll() is None, stderr_file.read_text()[-3000:]
            admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{int(port_file.read_text())}"})
            assert admin.list_topics(timeout=30).brokers
        finally:
            broker.terminate()
            broker.wait(timeout=60)
    output = stderr_file.read_text()
    before = _imported_before(output, "ready on 127.0.0.1:")
    assert "eoslog.server.broker" in before  # the marker is where it should be
    assert _offenders(before) == []
    assert sorted(m for m in before for late in AFTER_THE_PORT if m == late or m.startswith(late + ".")) == []
    # ... and the codec and the partitions' code were loaded once serving. (Handler modules are imported with importlib, which
    # -X importtime does not report; test_a_broker_listens_before_loading_coordinators_and_the_cleaner
    # checks them in sys.modules.)
    assert {"eoslog.protocol.codec", "eoslog.log.log"} <= {
        line.rsplit("|", 1)[1].strip() for line in output.splitlines() if line.startswith("import time:")}
