"""The consume-transform-produce copier of tests/transactions/test_copier.py with the consumer group
protocol (KIP-848): its TxnOffsetCommits are fenced by member epoch. Copiers are SIGKILLed and replaced
while they copy, and the broker is SIGKILLed once (the group comes back from its records); the same
checks: a read_committed reader finds no duplicates, output set == input set, each input partition's
order preserved."""

from __future__ import annotations

import pytest

from tests.groups.consumer_protocol.conftest import CONSUMER_GROUP_PROPERTIES
from tests.transactions.copier_run import run_copier

SCHEDULE = [(0.15, "copier"), (0.40, "broker"), (0.60, "copier")]

pytestmark = pytest.mark.slow  # ~25 s, like its classic sibling (tests/transactions/test_copier.py)


def test_copier_exactly_once_with_the_consumer_protocol(tmp_path):
    run_copier(tmp_path, 20_000, SCHEDULE, protocol="consumer", properties=CONSUMER_GROUP_PROPERTIES, deadline_s=120)
