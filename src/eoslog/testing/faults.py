"""Test-side guards for the fault machinery of eoslog/faults: a test needing network namespaces or FUSE
is skipped only where the facility is truly absent for this user (not root, no /dev/fuse), with the
reason; anywhere it should work (root, which CI is), a failure to build it fails the test instead of
hiding behind a skip."""

from __future__ import annotations

import os

import pytest


def require_network() -> None:
    """Network namespaces with nftables: root only. As root, `make test` has installed iproute2 and
    nftables, so what is still missing is a failure."""
    from eoslog.faults.netns import unavailable_reason

    if os.geteuid() != 0:
        pytest.skip(f"network namespaces and nftables need root; running as uid {os.geteuid()}")
    reason = unavailable_reason()
    if reason is not None:
        pytest.fail(f"running as root, yet no namespace network can be built: {reason}")
