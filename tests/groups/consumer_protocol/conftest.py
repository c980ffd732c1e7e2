import pytest

from eoslog.testing.process import BrokerProcess

# Short consumer-group sessions so a crashed member's partitions move within the test's budget.
CONSUMER_GROUP_PROPERTIES = {
    "group.consumer.session.timeout.ms": "3000",
    "group.consumer.heartbeat.interval.ms": "300",
}


@pytest.fixture
def consumer_broker(tmp_path):
    """A real `eoslog serve` subprocess with 3 s consumer-group sessions."""
    with BrokerProcess(data_dir=tmp_path / "data", properties=CONSUMER_GROUP_PROPERTIES) as broker:
        yield broker
