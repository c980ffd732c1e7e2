"""Fixtures for the transaction coordinator core tests."""

from __future__ import annotations

import pytest
from txn_harness import Harness


@pytest.fixture
def harness() -> Harness:
    return Harness()
