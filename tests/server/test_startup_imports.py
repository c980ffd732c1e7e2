"""`eoslog serve` imports only what a single node needs before it accepts connections (issue 16, target 6).

A fresh interpreter imports the serve path, and the test names the heavy packages that must not be among
its modules; each is imported later by whatever first needs it (cluster mode, a tool, a client library).
"""

from __future__ import annotations

import json
import subprocess
import sys

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
)


def test_serve_path_does_not_import_heavy_packages() -> None:
    code = (
        "import importlib, json, sys\n"
        f"for name in {SERVE_PATH!r}: importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    loaded = set(json.loads(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                                           text=True).stdout))
    offenders = sorted(m for m in loaded for bad in NOT_ON_SERVE_PATH if m == bad or m.startswith(bad + "."))
    assert offenders == []


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
