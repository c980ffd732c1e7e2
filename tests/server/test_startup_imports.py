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
