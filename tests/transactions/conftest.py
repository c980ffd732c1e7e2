import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from txn_clients import create_topics  # noqa: F401  (re-exported for the tests)

from eoslog.testing.embedded import EmbeddedBroker


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory):
    """One embedded broker per module, with a fast transaction-timeout check."""
    properties = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"}
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("txn") / "data", properties=properties) as broker:
        yield broker
