"""What the packaging tests share: commands run without the suite's PYTHONPATH, and fresh venvs holding the
wheel with one extra or none."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def clean_env() -> dict[str, str]:
    """No PYTHONPATH: the suite's own (the source tree) must not leak into a fresh venv."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}


def run(*command, cwd: Path, timeout: float = 120, env: dict | None = None) -> subprocess.CompletedProcess:
    result = subprocess.run([str(c) for c in command], cwd=cwd, env=env or clean_env(), capture_output=True,
                            text=True, timeout=timeout, check=False, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, f"{command} failed:\n{result.stdout}\n{result.stderr}"
    return result


def fresh_venv(wheel: Path, where: Path, extra: str | None) -> Path:
    """A venv without system site-packages holding the wheel with one extra (or none) and its dependencies,
    from pip's cache or PyPI; this interpreter's pip installs into it (a venv's own pip costs seconds)."""
    venv = where / f"venv-{extra or 'none'}"
    run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=where)
    target = f"{wheel}[{extra}]" if extra else str(wheel)
    run(sys.executable, "-m", "pip", "--python", venv / "bin/python", "install", "--quiet",
        "--disable-pip-version-check", target, cwd=where, timeout=600)
    assert "include-system-site-packages = false" in (venv / "pyvenv.cfg").read_text()
    return venv
