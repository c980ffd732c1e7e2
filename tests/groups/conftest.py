import pytest

from eoslog.testing.process import BrokerProcess


@pytest.fixture
def broker_process(tmp_path):
    """A real `eoslog serve` subprocess (rebalance delay 0, as in Kafka test setups)."""
    with BrokerProcess(data_dir=tmp_path / "data") as broker:
        yield broker


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
