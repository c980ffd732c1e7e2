import pytest

from eoslog.testing.process import BrokerProcess


@pytest.fixture(scope="module")
def broker_process(tmp_path_factory):
    """A real `eoslog serve` subprocess on a free loopback port, shared by one test module."""
    with BrokerProcess(data_dir=tmp_path_factory.mktemp("broker") / "data") as broker:
        yield broker


@pytest.fixture
def fresh_broker(tmp_path):
    with BrokerProcess(data_dir=tmp_path / "data") as broker:
        yield broker
