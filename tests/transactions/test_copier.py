"""Kafka's own exactly-once system test, in small.

100,000 numbered records in a 4-partition input topic are copied to a 3-partition output topic by
transactional consume-transform-produce processes (send_offsets_to_transaction, a third of the
transactions aborted on purpose). While they copy, the broker is SIGKILLed and restarted 3 times and
copiers are SIGKILLed and replaced 3 times; faults are triggered by copy progress, not by the clock, so
they land while work is under way however fast the machine is. A read_committed reader then finds no
duplicates, output set == input set, and each input partition's order preserved."""

from __future__ import annotations

import pytest
from copier_run import run_copier

# (fraction of the input copied, fault): alternate broker and copier SIGKILLs while the copy runs.
SCHEDULE = [(0.10, "broker"), (0.20, "copier"), (0.35, "broker"), (0.50, "copier"), (0.65, "broker"),
            (0.80, "copier")]

pytestmark = pytest.mark.slow


def test_copier_exactly_once_under_broker_and_copier_sigkills(tmp_path):
    run_copier(tmp_path, 100_000, SCHEDULE)
