"""Check-back transactions with real processes (issue 20; docs/transactions.md, "Check-back transactions"):
a real `eoslog serve`, the producer as a child process SIGKILLed at a named point of its local transaction
(checkback_child.py), the group's resolver a CheckBackProducer in this process answering from the same SQLite
database, and a read_committed confluent-kafka reader checking the outcome against the database: no
duplicates, every committed row's record delivered, no record visible without its row. The crash cases (a)
and (b) and the example run with SQLite and with a real PostgreSQL server (``orders_db``).

Short settings so each case takes a few seconds: transaction timeout 1 s, timer every 100 ms, back-off 100 ms,
max checks 3."""

from __future__ import annotations

import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import confluent_kafka
import pytest
from click.testing import CliRunner

from eoslog.client.checkback import CheckBackProducer
from eoslog.client.connection import BrokerConnection
from eoslog.coordinator.transaction.log_format import decode_key, decode_value, key_version, partition_for
from eoslog.protocol import messages
from eoslog.testing.process import BrokerProcess, free_port
from eoslog.testing.wait import wait_until
from eoslog.tools.txn_cli import transactions_group
from tests.server.test_metrics import Scrape
from tests.transactions.checkback_child import (
    committed_orders,
    connect,
    connect_postgres,
    resolve,
    store,
    value_of,
)
from tests.transactions.txn_clients import READERS, create_topics

CHILD = Path(__file__).parent / "checkback_child.py"
GROUP = "orders-app"
TOPIC = "cb-orders"
MAX_CHECKS = 3
PROPERTIES = {
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "100",
    "eoslog.transaction.check.max.checks": str(MAX_CHECKS),
    "eoslog.transaction.check.backoff.ms": "100",
    "eoslog.transaction.check.backoff.max.ms": "400",
    "eoslog.transaction.check.lease.ms": "3000",
}
TRANSACTION_STATE_PARTITIONS = 10  # the broker's default transaction.state.log.num.partitions


@pytest.fixture
def broker(tmp_path):
    metrics_port = free_port()
    properties = {**PROPERTIES, "eoslog.metrics.listen": f"127.0.0.1:{metrics_port}"}
    with BrokerProcess(data_dir=tmp_path / "data", properties=properties) as process:
        process.metrics_port = metrics_port
        create_topics(process.bootstrap, {TOPIC: 2})
        yield process


@pytest.fixture(params=["sqlite", "postgres"])
def orders_db(request, tmp_path) -> str:
    """Where the orders go: a SQLite file's path, or the DSN of a fresh database on the module's PostgreSQL
    server (checkback_child.py's helpers take either)."""
    if request.param == "sqlite":
        return str(tmp_path / "orders.db")
    return request.getfixturevalue("postgres_server").create_database(f"orders_{tmp_path.name.lower()}")


def run_producer(broker: BrokerProcess, db: Path | str, transactional_id: str, count: int, crash_point: str) -> str:
    """Runs the child until it kills itself in its last transaction; returns that transaction's txn id."""
    done = subprocess.run([sys.executable, str(CHILD), broker.bootstrap, str(db), GROUP, transactional_id, TOPIC,
                           "0", str(count), crash_point], check=False, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == -9, f"child ended with {done.returncode}:\n{done.stdout}\n{done.stderr}"
    opened = [line.split() for line in done.stdout.splitlines() if line.startswith("txn ")]
    assert [int(order) for _, order, _ in opened] == list(range(count))
    return opened[-1][2]


def check_delivery(broker: BrokerProcess, db: Path | str, partitions=(0, 1)) -> list[bytes]:
    """The read_committed checker: exactly the committed rows' records, each once. (The reader waits for a
    position at the end offset, which an empty partition never reports: pass only partitions written to.)"""
    got = READERS["confluent"](broker.bootstrap, [(TOPIC, p) for p in partitions], "read_committed")
    values = [value for partition in got.values() for value in partition]
    assert len(values) == len(set(values)), f"duplicates: {sorted(values)}"
    assert set(values) == {value_of(order) for order in committed_orders(str(db))}
    return values


def transaction_state(broker: BrokerProcess, transactional_id: str) -> str:
    wire = BrokerConnection.from_bootstrap(broker.bootstrap)
    try:
        response = wire.request(65, 0, messages.DescribeTransactionsRequest(transactional_ids=[transactional_id]))
    finally:
        wire.close()
    return response.transaction_states[0].transaction_state


def logged_values(broker: BrokerProcess, transactional_id: str) -> list:
    """Every __transaction_state value logged for ``transactional_id``, read by a plain Kafka client."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "cb-log-reader",
                                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        partition = partition_for(transactional_id, TRANSACTION_STATE_PARTITIONS)
        consumer.assign([confluent_kafka.TopicPartition("__transaction_state", partition,
                                                        confluent_kafka.OFFSET_BEGINNING)])
        values = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error():
                if message.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    return values
                continue
            key = message.key()
            if key_version(key) == 0 and decode_key(key) == transactional_id and message.value() is not None:
                values.append(decode_value(message.value()))
        raise TimeoutError("__transaction_state not read to its end")
    finally:
        consumer.close()


def answers_for(resolver: CheckBackProducer, txn_id: str) -> list[tuple[str, int]]:
    return [(answer, code) for answered, answer, code in list(resolver.answered) if answered == txn_id]


def cli(*args: str) -> str:
    result = CliRunner().invoke(transactions_group, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_killed_after_the_db_commit_is_delivered_once_after_check_back(broker, orders_db):
    db = orders_db
    crashed = run_producer(broker, db, "cb-a", 3, "after-db-commit")
    assert committed_orders(str(db)) == {0, 1, 2}
    # Nobody resolves yet: the transaction waits in Checking, first check due (tools show it, with its count).
    wait_until(lambda: transaction_state(broker, "cb-a") == "Checking", 10, "the abandoned transaction checking")
    listed = [line.split() for line in cli("list", "-b", broker.bootstrap).splitlines() if line.startswith("cb-a ")]
    assert [row[2:] for row in listed] == [["Checking", "0"]]
    assert "CheckBackGroup: orders-app\nCheckCount: 0\n" in cli("describe", "-b", broker.bootstrap, "cb-a")
    assert cli("find-hanging", "-b", broker.bootstrap).count(TOPIC) == 0  # open on purpose, not hanging
    with CheckBackProducer(broker.bootstrap, GROUP, resolver=lambda txn_id: resolve(str(db), txn_id),
                           poll_wait_ms=500) as resolver:
        wait_until(lambda: ("commit", 0) in answers_for(resolver, crashed), 15, f"{crashed} committed by check-back")
    assert transaction_state(broker, "cb-a") == "CompleteCommit"
    # decided: no check count any more ("Checks 0" read as a transaction never checked; issue 40)
    listed = [line.split() for line in cli("list", "-b", broker.bootstrap).splitlines() if line.startswith("cb-a ")]
    assert [row[2:] for row in listed] == [["CompleteCommit", "-"]]
    assert sorted(check_delivery(broker, db)) == [value_of(o) for o in (0, 1, 2)]
    scrape = Scrape(broker.metrics_port)
    assert scrape.value("eoslog_transaction_coordinator_check_back_resolved_total", outcome="commit") == 1
    assert scrape.value("eoslog_transaction_coordinator_check_back_answers_total", answer="commit") == 1


def test_killed_before_the_db_commit_is_never_visible(broker, orders_db):
    db = orders_db
    crashed = run_producer(broker, db, "cb-b", 3, "before-db-commit")
    with CheckBackProducer(broker.bootstrap, GROUP, resolver=lambda txn_id: resolve(str(db), txn_id),
                           poll_wait_ms=500) as resolver:
        wait_until(lambda: ("rollback", 0) in answers_for(resolver, crashed), 15, f"{crashed} rolled back")
    assert transaction_state(broker, "cb-b") == "CompleteAbort"
    assert committed_orders(str(db)) == {0, 1}
    assert sorted(check_delivery(broker, db)) == [value_of(o) for o in (0, 1)]
    reasons = [v.abort_reason for v in logged_values(broker, "cb-b") if v.abort_reason]
    assert reasons and set(reasons) == {"check-back: rollback"}


def test_a_resolver_that_never_knows_is_aborted_after_max_checks_with_the_reason(broker, tmp_path):
    db = tmp_path / "orders.db"
    crashed = run_producer(broker, db, "cb-c", 2, "before-db-commit")
    with CheckBackProducer(broker.bootstrap, GROUP, resolver=lambda txn_id: "unknown", poll_wait_ms=500) as resolver:
        wait_until(lambda: transaction_state(broker, "cb-c") == "CompleteAbort", 15, "aborted after max checks")
        assert answers_for(resolver, crashed) == [("unknown", 0)] * MAX_CHECKS
    check_delivery(broker, db)
    logged = logged_values(broker, "cb-c")
    checking = [v.check_count for v in logged if v.check_count >= 0 and v.state.kafka_name == "Checking"]
    assert checking == list(range(MAX_CHECKS)), "one Checking record per check, counts in order"
    assert logged[-1].state.kafka_name == "CompleteAbort"
    assert logged[-1].abort_reason == f"check-back: max checks ({MAX_CHECKS}) reached"
    assert f"AbortReason: check-back: max checks ({MAX_CHECKS}) reached" in cli("describe", "-b", broker.bootstrap,
                                                                                 "cb-c")
    scrape = Scrape(broker.metrics_port)
    assert scrape.value("eoslog_transaction_coordinator_check_back_checks_total") == MAX_CHECKS
    assert scrape.value("eoslog_transaction_coordinator_check_back_answers_total", answer="unknown") == MAX_CHECKS
    assert scrape.value("eoslog_transaction_coordinator_check_back_resolved_total", outcome="abort") == 1
    assert scrape.value("eoslog_transaction_coordinator_transactional_ids", state="Checking") == 0


def test_a_transaction_being_checked_past_the_max_timeout_is_not_hanging(tmp_path):
    """Open past transaction.max.timeout.ms on purpose: neither find-hanging nor the partition metric calls
    it hanging (an ABORT marker written by hand could contradict its group's commit answer)."""
    metrics_port = free_port()
    properties = {**PROPERTIES, "transaction.max.timeout.ms": "1500",
                  "eoslog.metrics.listen": f"127.0.0.1:{metrics_port}"}
    with BrokerProcess(data_dir=tmp_path / "data", properties=properties) as process:
        create_topics(process.bootstrap, {TOPIC: 2})
        run_producer(process, tmp_path / "orders.db", "cb-h", 1, "after-db-commit")  # nobody resolves it
        wait_until(lambda: transaction_state(process, "cb-h") == "Checking", 10, "Checking")

        def oldest_age_s() -> float:
            scrape = Scrape(metrics_port)
            return max(scrape.value("eoslog_partition_oldest_open_transaction_age_seconds", topic=TOPIC, partition=p)
                       for p in (0, 1))

        wait_until(lambda: oldest_age_s() > 2.0, 10, "an open transaction older than transaction.max.timeout.ms")
        assert transaction_state(process, "cb-h") == "Checking"
        scrape = Scrape(metrics_port)
        open_txns = sum(scrape.value("eoslog_partition_open_transactions", topic=TOPIC, partition=p) for p in (0, 1))
        hanging = sum(scrape.value("eoslog_partition_hanging_transactions", topic=TOPIC, partition=p) for p in (0, 1))
        assert (open_txns, hanging) == (1, 0)
        assert cli("find-hanging", "-b", process.bootstrap, "--max-age-ms", "1500") == "none\n"


def test_coordinator_killed_while_checking_resolves_after_restart(broker, tmp_path):
    db = tmp_path / "orders.db"
    crashed = run_producer(broker, db, "cb-r", 2, "after-db-commit")
    wait_until(lambda: transaction_state(broker, "cb-r") == "Checking", 10, "the abandoned transaction checking")
    broker.restart(hard=True)  # SIGKILL: nothing flushed beyond what the group commit made durable
    assert transaction_state(broker, "cb-r") == "Checking"  # loaded back from __transaction_state
    with CheckBackProducer(broker.bootstrap, GROUP, resolver=lambda txn_id: resolve(str(db), txn_id),
                           poll_wait_ms=500) as resolver:
        wait_until(lambda: ("commit", 0) in answers_for(resolver, crashed), 15, f"{crashed} committed after restart")
    assert sorted(check_delivery(broker, db)) == [value_of(o) for o in (0, 1)]


EXAMPLES = Path(__file__).parents[2] / "examples"


@pytest.mark.parametrize("database", ["sqlite", "postgres"])
def test_the_example_runs_as_documented(broker, tmp_path, request, database):
    """examples/checkback_sqlite.py and checkback_postgres.py, the way docs/transactions.md says to run them
    (shorter timeout)."""
    if database == "sqlite":
        where = ["--db", str(tmp_path / "example.db")]
    else:
        where = ["--dsn", request.getfixturevalue("postgres_server").create_database(f"example_{tmp_path.name}")]
    common = [sys.executable, str(EXAMPLES / f"checkback_{database}.py"), "--bootstrap", broker.bootstrap, *where]
    placed = subprocess.run([*common, "place", "2", "--crash-after-db-commit", "--transaction-timeout-ms", "1000"],
                            check=False, capture_output=True, text=True, timeout=60)
    assert placed.returncode == -9 and "crashing before the Kafka commit" in placed.stdout, placed.stderr
    resolving = subprocess.Popen([*common, "resolve", "--seconds", "30"], stdout=subprocess.PIPE, text=True)
    try:
        line = wait_until(lambda: resolving.stdout.readline(), 20, "the example's resolver answering")
        assert line.startswith("check-back asked about ") and line.strip().endswith(": commit"), line
        # The answer goes to the broker after the resolver returns: keep the resolver up until it has. Until
        # then the open transaction holds the LSO below order 2, so read_committed sees order 1 only.
        wait_until(lambda: len(committed_values(broker, f"orders-{database}")) == 2, 10,
                   "the abandoned order committed")
    finally:
        resolving.kill()
        resolving.wait()
    assert sorted(committed_values(broker, f"orders-{database}")) == [b"1:item-1", b"2:item-2"]


def test_the_examples_do_not_share_a_check_back_group_or_topic():
    """Run side by side, each example's resolver answers every check of its group from its own database:
    a shared group had the SQLite resolver answer rollback for a transaction PostgreSQL had committed."""
    import ast

    constants = {}
    for database in ("sqlite", "postgres"):
        tree = ast.parse((EXAMPLES / f"checkback_{database}.py").read_text())
        constants[database] = {node.targets[0].id: node.value.value for node in tree.body
                               if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                               and node.targets[0].id in ("GROUP", "TOPIC")}
    assert constants["sqlite"].keys() == constants["postgres"].keys() == {"GROUP", "TOPIC"}
    for name in ("GROUP", "TOPIC"):
        assert constants["sqlite"][name] != constants["postgres"][name], name


def committed_values(broker: BrokerProcess, topic: str) -> list[bytes]:
    return READERS["confluent"](broker.bootstrap, [(topic, 0)], "read_committed")[(topic, 0)]


def test_a_lost_end_txn_is_left_to_check_back_and_the_instance_refuses_new_work(broker, tmp_path):
    """EndTxn(commit) cannot reach the broker (it was SIGKILLed after the database commit): the client raises,
    refuses another local transaction (its InitProducerId would fence the undecided one), and after the
    restart the group commits it by check-back."""
    db = tmp_path / "orders.db"
    producer = CheckBackProducer(broker.bootstrap, GROUP, transactional_id="cb-lost", transaction_timeout_ms=1000,
                                 timeout_s=2)
    try:
        with pytest.raises((TimeoutError, ConnectionError, OSError)), producer.local_transaction() as txn:
            txn.send(TOPIC, value_of(7), partition=1)
            connection = connect(str(db))
            connection.execute("BEGIN IMMEDIATE")
            connection.execute("INSERT INTO txn_outcomes VALUES (?, 'commit')", (txn.id,))
            connection.execute("INSERT INTO orders VALUES (7, ?)", (txn.id,))
            connection.execute("COMMIT")
            connection.close()
            broker.kill()
        broker.start()
        with pytest.raises(RuntimeError, match="left to check-back"), producer.local_transaction():
            pass
    finally:
        producer.close()
    with CheckBackProducer(broker.bootstrap, GROUP, resolver=lambda txn_id: resolve(str(db), txn_id),
                           poll_wait_ms=500) as resolver:
        wait_until(lambda: ("commit", 0) in answers_for(resolver, txn.id), 15, f"{txn.id} committed by check-back")
    assert check_delivery(broker, db, partitions=(1,)) == [value_of(7)]


def test_postgres_decides_each_transaction_once_when_producer_and_resolver_race(postgres_server, tmp_path):
    """The outcome table's rule on PostgreSQL, with the two sides really concurrent: a check that meets the
    producer's uncommitted row waits for it and answers what the producer's transaction did (commit, or
    rollback when it dies first); a producer that comes after the resolver's row fails on the primary key
    (its `with` block then aborts the Kafka transaction)."""
    import psycopg

    dsn = postgres_server.create_database(f"race_{tmp_path.name}")
    producer = connect_postgres(dsn)
    watcher = connect_postgres(dsn)

    def resolver_waiting() -> bool:  # the resolver's INSERT waits on the producer's transaction id
        (waiting,) = watcher.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                                     " AND wait_event_type = 'Lock' AND wait_event = 'transactionid'"
                                     " AND query LIKE '%INSERT INTO txn_outcomes%'").fetchone()
        return waiting == 1

    pool = ThreadPoolExecutor(1)
    try:
        with producer.transaction():
            producer.execute("INSERT INTO txn_outcomes VALUES ('t-slow', 'commit')")
            answer = pool.submit(resolve, dsn, "t-slow")
            wait_until(resolver_waiting, 5, "the resolver waiting for the producer's open transaction")
            assert not answer.done()
            producer.execute("INSERT INTO orders VALUES (1, 't-slow')")
        assert answer.result(5) == "commit"

        with pytest.raises(ConnectionAbortedError), producer.transaction():  # the producer fails before COMMIT
            producer.execute("INSERT INTO txn_outcomes VALUES ('t-dying', 'commit')")
            answer = pool.submit(resolve, dsn, "t-dying")
            wait_until(resolver_waiting, 5, "the resolver waiting for the producer's open transaction")
            raise ConnectionAbortedError("the producer dies before its database commit")
        assert answer.result(5) == "rollback"

        assert resolve(dsn, "t-late") == "rollback"
        with pytest.raises(psycopg.errors.UniqueViolation):
            store(producer, 3, "t-late")
        assert [resolve(dsn, t) for t in ("t-slow", "t-dying", "t-late")] == ["commit", "rollback", "rollback"]
        assert committed_orders(dsn) == {1}
    finally:
        pool.shutdown()
        producer.close()
        watcher.close()


def test_the_broker_and_the_client_do_not_load_psycopg(broker):
    """psycopg belongs to the test extra and the Postgres example: neither `eoslog serve` nor the check-back
    client may load it (psycopg[binary] maps its C extension, so a running broker would show it)."""
    code = ("import sys, eoslog.cli, eoslog.server.run, eoslog.client.checkback; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('psycopg', 'psycopg_binary')))")
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[]"
    maps = Path(f"/proc/{broker.process.pid}/maps").read_text()
    assert "site-packages" in maps  # the broker's own C extensions (crc32c, cramjam) are there to see
    assert "psycopg" not in maps


def test_the_client_needs_no_spark_extra():
    """eoslog.client.checkback reuses the Spark sink's protocol code but must not need its extra (numpy, pyarrow)."""
    code = "import sys, eoslog.client.checkback; print(sorted(m for m in ('numpy', 'pyarrow') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[]"


def test_keyed_records_land_where_kafka_clients_put_them(broker):
    """A keyed send picks the partition Java's default partitioner picks (murmur2), as librdkafka's
    murmur2_random does: check-back records co-partition with other producers' records of the same key."""
    create_topics(broker.bootstrap, {"cb-keyed": 3})
    keys = [f"customer-{i}".encode() for i in range(12)]
    reference = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random"})
    expected = {}
    for key in keys:
        reference.produce("cb-keyed", key=key, value=b"probe",
                          on_delivery=lambda err, msg: expected.__setitem__(msg.key(), msg.partition()))
    assert reference.flush(30) == 0 and len(expected) == len(keys)
    with CheckBackProducer(broker.bootstrap, GROUP) as producer, producer.local_transaction() as txn:
        for key in keys:
            txn.send("cb-keyed", key, key=key, wait=False)
    got = READERS["confluent"](broker.bootstrap, [("cb-keyed", p) for p in range(3)], "read_committed")
    placed = {value: partition for (_, partition), values in got.items() for value in values if value != b"probe"}
    assert placed == expected
