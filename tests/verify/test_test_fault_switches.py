"""The test-only broker switches (eoslog.test.*): refused without EOSLOG_ALLOW_TEST_FAULTS=1, and
when allowed they reach the partitions."""

from __future__ import annotations

import pytest

from eoslog.cluster.partition import READ_COMMITTED, READ_UNCOMMITTED, Partition
from eoslog.server.config import TEST_FAULT_PROPERTIES, BrokerConfig, ConfigError


@pytest.mark.parametrize("name", sorted(TEST_FAULT_PROPERTIES))
def test_switch_is_refused_without_the_environment_variable(name, monkeypatch):
    monkeypatch.delenv("EOSLOG_ALLOW_TEST_FAULTS", raising=False)
    with pytest.raises(ConfigError, match="EOSLOG_ALLOW_TEST_FAULTS=1"):
        BrokerConfig().set_property(name, "true")
    monkeypatch.setenv("EOSLOG_ALLOW_TEST_FAULTS", "yes")  # only "1" counts
    with pytest.raises(ConfigError):
        BrokerConfig().set_property(name, "true")


def test_unknown_test_switch_is_refused(monkeypatch):
    monkeypatch.setenv("EOSLOG_ALLOW_TEST_FAULTS", "1")
    with pytest.raises(ConfigError, match="unknown test fault switch"):
        BrokerConfig().set_property("eoslog.test.lose.everything", "true")


@pytest.mark.parametrize("name", sorted(TEST_FAULT_PROPERTIES))
def test_allowed_switch_reaches_partitions(name, monkeypatch):
    attribute = TEST_FAULT_PROPERTIES[name]
    monkeypatch.setattr(Partition, attribute, False)  # restored after the test: the switch is process-wide
    monkeypatch.setenv("EOSLOG_ALLOW_TEST_FAULTS", "1")
    config = BrokerConfig()
    config.set_property(name, "true")
    assert config.test_faults == {name: True}
    assert getattr(Partition, attribute) is True


def test_read_committed_upper_bound_follows_the_switch(monkeypatch):
    class Stub:
        last_stable_offset = 5
        high_watermark = 9
        test_read_committed_past_lso = False

    stub = Stub()
    assert Partition.fetch_upper_bound(stub, READ_COMMITTED) == 5
    assert Partition.fetch_upper_bound(stub, READ_UNCOMMITTED) == 9
    stub.test_read_committed_past_lso = True
    assert Partition.fetch_upper_bound(stub, READ_COMMITTED) == 9
