"""A pytest plugin (entry point ``eoslog``): the ``eoslog_broker`` fixture yields a real broker's
bootstrap address, so any Python project can test against Kafka without a JVM or Docker."""

from __future__ import annotations

import pytest


@pytest.fixture
def eoslog_broker(tmp_path):
    """A fresh embedded broker per test: its bootstrap address, e.g. ``"127.0.0.1:40123"``."""
    from eoslog.testing.embedded import EmbeddedBroker

    with EmbeddedBroker(data_dir=tmp_path / "eoslog-data") as broker:
        yield broker.bootstrap


@pytest.fixture
def eoslog_embedded(tmp_path):
    """Like ``eoslog_broker`` but yields the :class:`EmbeddedBroker` itself (bootstrap, call, stop)."""
    from eoslog.testing.embedded import EmbeddedBroker

    with EmbeddedBroker(data_dir=tmp_path / "eoslog-data") as broker:
        yield broker
