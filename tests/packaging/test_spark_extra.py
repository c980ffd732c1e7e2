"""`import eoslog.spark` without the spark extra says which `pip install` fixes it (issue 17).

Each module of the extra is blocked in a fresh interpreter (``sys.modules[name] = None`` makes its import
fail as if it were not installed), rather than uninstalling anything.
"""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("missing", ["numpy", "pyarrow", "pyspark"])
def test_the_missing_extra_names_the_pip_install(missing):
    code = f"import sys; sys.modules[{missing!r}] = None\nimport eoslog.spark\n"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert lines[-1] == "ImportError: eoslog.spark needs the spark extra: pip install 'eoslog[spark]'"
    # The cause is chained, so the module that was missing is still on the screen.
    assert f"ModuleNotFoundError: No module named {missing!r}" in result.stderr
    assert "UnboundLocalError" not in result.stderr
