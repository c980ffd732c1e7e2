"""A check-back producer as a child process, for tests/transactions/test_checkback.py: runs ``count`` local
transactions (an order row + its txn id in one SQLite transaction, the order's record in one Kafka
transaction) and SIGKILLs itself during the last one at ``crash_point``:

- ``before-db-commit``: the record is written (acks=all), the database transaction never committed;
- ``after-db-commit``: the database committed, EndTxn never sent.

Usage: checkback_child.py BOOTSTRAP DB GROUP TRANSACTIONAL_ID TOPIC FIRST_ORDER COUNT CRASH_POINT
Prints ``txn <order> <txn id>`` as each transaction opens.

The database pattern is the one examples/checkback_sqlite.py documents: the producer's transaction inserts
(txn_id, 'commit') into ``txn_outcomes`` and the resolver inserts (txn_id, 'rollback') if nothing is there
yet, so whichever commits first decides and the other cannot contradict it (the primary key).
"""

from __future__ import annotations

import os
import signal
import sqlite3
import sys

from eoslog.checkback import CheckBackProducer

SCHEMA = """
CREATE TABLE IF NOT EXISTS orders (order_id INTEGER PRIMARY KEY, txn_id TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS txn_outcomes (txn_id TEXT PRIMARY KEY, outcome TEXT NOT NULL);
"""


def connect(path: str) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=10, isolation_level=None)  # explicit BEGIN / COMMIT below
    db.executescript(SCHEMA)
    return db


def resolve(path: str, txn_id: str) -> str:
    """The group's resolver: the outcome the database recorded, recording 'rollback' if it has none yet."""
    db = connect(path)
    try:
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT OR IGNORE INTO txn_outcomes VALUES (?, 'rollback')", (txn_id,))
        (outcome,) = db.execute("SELECT outcome FROM txn_outcomes WHERE txn_id = ?", (txn_id,)).fetchone()
        db.execute("COMMIT")
        return outcome
    finally:
        db.close()


def committed_orders(path: str) -> set[int]:
    db = connect(path)
    try:
        return {row[0] for row in db.execute(
            "SELECT order_id FROM orders JOIN txn_outcomes USING (txn_id) WHERE outcome = 'commit'")}
    finally:
        db.close()


def value_of(order: int) -> bytes:
    return f"order-{order}".encode()


def main(bootstrap: str, db_path: str, group: str, transactional_id: str, topic: str, first: int, count: int,
         crash_point: str) -> None:
    db = connect(db_path)
    producer = CheckBackProducer(bootstrap, group, transactional_id=transactional_id, transaction_timeout_ms=1000)
    for order in range(first, first + count):
        last = order == first + count - 1
        with producer.local_transaction() as txn:
            print(f"txn {order} {txn.id}", flush=True)
            txn.send(topic, value_of(order), partition=order % 2)  # acknowledged before the database commits
            if last and crash_point == "before-db-commit":
                os.kill(os.getpid(), signal.SIGKILL)
            db.execute("BEGIN IMMEDIATE")
            db.execute("INSERT INTO txn_outcomes VALUES (?, 'commit')", (txn.id,))
            db.execute("INSERT INTO orders VALUES (?, ?)", (order, txn.id))
            db.execute("COMMIT")
            if last and crash_point == "after-db-commit":
                os.kill(os.getpid(), signal.SIGKILL)
    producer.close()


if __name__ == "__main__":
    bootstrap, db_path, group, transactional_id, topic, first, count, crash_point = sys.argv[1:]
    main(bootstrap, db_path, group, transactional_id, topic, int(first), int(count), crash_point)
