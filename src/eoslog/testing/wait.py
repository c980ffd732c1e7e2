"""Waiting for a condition with a deadline: how tests wait, never with a bare sleep."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(condition: Callable[[], T], timeout: float, what: str, interval: float = 0.05) -> T:
    """Calls ``condition`` until it returns something true, and returns that; AssertionError naming ``what``
    once ``timeout`` seconds pass without it."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(interval)
