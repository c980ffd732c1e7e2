"""A check-back producer as a child process, for tests/transactions/test_checkback.py: runs ``count`` local
transactions (an order row + its txn id in one database transaction, the order's record in one Kafka
transaction) and SIGKILLs itself during the last one at ``crash_point``:

- ``before-db-commit``: the record is written (acks=all), the database transaction never committed;
- ``after-db-commit``: the database committed, EndTxn never sent.

Usage: checkback_child.py BOOTSTRAP DB GROUP TRANSACTIONAL_ID TOPIC FIRST_ORDER COUNT CRASH_POINT
Prints ``txn <order> <txn id>`` as each transaction opens. DB is a SQLite file's path or a PostgreSQL DSN
(``host=... dbname=...``, see :func:`is_postgres`); the helpers below take the same string.

The database pattern is the one examples/checkback_sqlite.py and checkback_postgres.py document: the
producer's transaction inserts (txn_id, 'commit') into ``txn_outcomes`` and the resolver inserts
(txn_id, 'rollback') if nothing is there yet, so whichever commits first decides and the other cannot
contradict it (the primary key).
"""

from __future__ import annotations

import os
import signal
import sqlite3
import sys

from eoslog.client.checkback import CheckBackProducer

SCHEMA = """
CREATE TABLE IF NOT EXISTS orders (order_id INTEGER PRIMARY KEY, txn_id TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS txn_outcomes (txn_id TEXT PRIMARY KEY, outcome TEXT NOT NULL);
"""


# PostgreSQL's side (examples/checkback_postgres.py explains DECIDE): one statement that inserts 'rollback'
# or returns the outcome already there, waiting on the primary key for a producer's uncommitted insert.
PG_SCHEMA = """
CREATE TABLE IF NOT EXISTS orders (order_id integer PRIMARY KEY, txn_id text NOT NULL);
CREATE TABLE IF NOT EXISTS txn_outcomes (txn_id text PRIMARY KEY, outcome text NOT NULL);
"""
PG_DECIDE = """
INSERT INTO txn_outcomes (txn_id, outcome) VALUES (%s, 'rollback')
ON CONFLICT (txn_id) DO UPDATE SET outcome = txn_outcomes.outcome
RETURNING outcome
"""
COMMITTED = "SELECT order_id FROM orders JOIN txn_outcomes USING (txn_id) WHERE outcome = 'commit'"


def is_postgres(target: str) -> bool:
    return target.startswith(("postgresql://", "postgres://")) or "dbname=" in target


def connect(path: str) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=10, isolation_level=None)  # explicit BEGIN / COMMIT below
    db.executescript(SCHEMA)
    return db


def connect_postgres(dsn: str):
    import psycopg  # only the Postgres cases need it

    db = psycopg.connect(dsn, autocommit=True)  # explicit `with db.transaction()` below
    db.execute(PG_SCHEMA)
    return db


def resolve(target: str, txn_id: str) -> str:
    """The group's resolver: the outcome the database recorded, recording 'rollback' if it has none yet."""
    if is_postgres(target):
        with connect_postgres(target) as db, db.transaction():
            return db.execute(PG_DECIDE, (txn_id,)).fetchone()[0]
    db = connect(target)
    try:
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT OR IGNORE INTO txn_outcomes VALUES (?, 'rollback')", (txn_id,))
        (outcome,) = db.execute("SELECT outcome FROM txn_outcomes WHERE txn_id = ?", (txn_id,)).fetchone()
        db.execute("COMMIT")
        return outcome
    finally:
        db.close()


def committed_orders(target: str) -> set[int]:
    if is_postgres(target):
        with connect_postgres(target) as db:
            return {row[0] for row in db.execute(COMMITTED)}
    db = connect(target)
    try:
        return {row[0] for row in db.execute(COMMITTED)}
    finally:
        db.close()


def store(db, order: int, txn_id: str) -> None:
    """The producer's local transaction: the outcome 'commit' and the order row, committed together."""
    if isinstance(db, sqlite3.Connection):
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO txn_outcomes VALUES (?, 'commit')", (txn_id,))
        db.execute("INSERT INTO orders VALUES (?, ?)", (order, txn_id))
        db.execute("COMMIT")
        return
    with db.transaction():
        db.execute("INSERT INTO txn_outcomes VALUES (%s, 'commit')", (txn_id,))
        db.execute("INSERT INTO orders VALUES (%s, %s)", (order, txn_id))


def value_of(order: int) -> bytes:
    return f"order-{order}".encode()


def main(bootstrap: str, db_path: str, group: str, transactional_id: str, topic: str, first: int, count: int,
         crash_point: str) -> None:
    db = connect_postgres(db_path) if is_postgres(db_path) else connect(db_path)
    producer = CheckBackProducer(bootstrap, group, transactional_id=transactional_id, transaction_timeout_ms=1000)
    for order in range(first, first + count):
        last = order == first + count - 1
        with producer.local_transaction() as txn:
            print(f"txn {order} {txn.id}", flush=True)
            txn.send(topic, value_of(order), partition=order % 2)  # acknowledged before the database commits
            if last and crash_point == "before-db-commit":
                os.kill(os.getpid(), signal.SIGKILL)
            store(db, order, txn.id)
            if last and crash_point == "after-db-commit":
                os.kill(os.getpid(), signal.SIGKILL)
    producer.close()


if __name__ == "__main__":
    bootstrap, db_path, group, transactional_id, topic, first, count, crash_point = sys.argv[1:]
    main(bootstrap, db_path, group, transactional_id, topic, int(first), int(count), crash_point)
