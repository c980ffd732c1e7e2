"""The KIP-664 tools against a live broker: list / describe transactions, describe producers, find a
hanging transaction and abort it with a marker, after which the last stable offset moves on."""

from __future__ import annotations

from click.testing import CliRunner
from txn_clients import READERS, create_topics, run_plan

from eoslog.client.connection import BrokerConnection
from eoslog.protocol import messages
from eoslog.protocol.errors import ErrorCode
from eoslog.records.builder import SimpleRecord, build_batch
from eoslog.tools.txn_cli import producers_group, transactions_group


def test_list_describe_and_abort_a_hanging_transaction(txn_broker):
    bootstrap = txn_broker.bootstrap
    create_topics(bootstrap, {"cli": 1})
    producer = run_plan("confluent", bootstrap, "cli-tx", [("commit", [("cli", 0, b"ok")]),
                                                           ("open", [("cli", 0, b"open")])])
    runner = CliRunner()
    listed = runner.invoke(transactions_group, ["list", "-b", bootstrap, "--state", "Ongoing"])
    assert listed.exit_code == 0, listed.output
    assert "cli-tx" in listed.output and "Ongoing" in listed.output
    described = runner.invoke(transactions_group, ["describe", "-b", bootstrap, "cli-tx"])
    assert "State: Ongoing" in described.output and "Partitions: cli-0" in described.output
    producer.finish_open(commit=True)
    producer.close()

    # A hanging transaction: a partition holds a transaction open that no coordinator knows about (what a
    # lost marker or a coordinator bug leaves behind). Written directly, past the KIP-890 check.
    partition = txn_broker.broker.registry.partition("cli", 0)

    def write_orphan():
        verifier, partition.transaction_verifier = partition.transaction_verifier, None
        try:
            batch = build_batch([SimpleRecord(None, b"orphan")], producer_id=987654, producer_epoch=3,
                                base_sequence=0, is_transactional=True)
            return partition.append(batch, transactional_id="gone").first_offset
        finally:
            partition.transaction_verifier = verifier

    start = txn_broker.call(write_orphan)
    described = runner.invoke(producers_group, ["describe", "-b", bootstrap, "cli-0"])
    assert "987654" in described.output, described.output
    hanging = runner.invoke(transactions_group, ["find-hanging", "-b", bootstrap, "--topic", "cli"])
    assert hanging.exit_code == 0, hanging.output
    rows = [line.split() for line in hanging.output.splitlines()[1:]]
    assert rows == [["cli-0", "987654", "3", str(start)]]
    assert READERS["confluent"](bootstrap, [("cli", 0)], "read_committed") == {("cli", 0): [b"ok", b"open"]}
    assert txn_broker.call(lambda: partition.last_stable_offset) == start

    aborted = runner.invoke(transactions_group, ["abort", "-b", bootstrap, "cli-0", "--start-offset", str(start)])
    assert aborted.exit_code == 0, aborted.output
    assert txn_broker.call(lambda: partition.last_stable_offset) == partition.high_watermark
    assert runner.invoke(transactions_group, ["find-hanging", "-b", bootstrap]).output.count("\n") == 1
    assert READERS["kafka-python"](bootstrap, [("cli", 0)], "read_committed") == {("cli", 0): [b"ok", b"open"]}


def test_list_by_pattern_and_an_invalid_pattern(txn_broker):
    bootstrap = txn_broker.bootstrap
    create_topics(bootstrap, {"pattern": 1})
    producer = run_plan("confluent", bootstrap, "pattern-tx", [("open", [("pattern", 0, b"open")])])
    try:
        runner = CliRunner()
        listed = runner.invoke(transactions_group, ["list", "-b", bootstrap, "--pattern", "pattern-.*"])
        assert listed.exit_code == 0 and "pattern-tx" in listed.output, listed.output
        other = runner.invoke(transactions_group, ["list", "-b", bootstrap, "--pattern", "other-.*"])
        assert other.exit_code == 0 and "pattern-tx" not in other.output, other.output
        # Kafka 4.x's answer to a pattern that does not compile: INVALID_REGULAR_EXPRESSION (128).
        bad = runner.invoke(transactions_group, ["list", "-b", bootstrap, "--pattern", "pattern-(.*"])
        assert bad.exit_code != 0 and "INVALID_REGULAR_EXPRESSION" in bad.output, bad.output
        wire = BrokerConnection.from_bootstrap(bootstrap)
        try:
            response = wire.request(66, 2, messages.ListTransactionsRequest(transactional_id_pattern="(", state_filters=[],
                                                                         producer_id_filters=[]))
        finally:
            wire.close()
        assert response.error_code == ErrorCode.INVALID_REGULAR_EXPRESSION == 128
    finally:
        producer.finish_open(commit=False)
        producer.close()
