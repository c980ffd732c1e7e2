"""The wheel, built once per test session (per xdist worker) from a copy of the tree: pip builds in place,
which would leave build/ and *.egg-info in the worktree."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from venvs import run

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", work / "dist", source, cwd=work)
    (built,) = (work / "dist").glob("eoslog-*.whl")
    return built
