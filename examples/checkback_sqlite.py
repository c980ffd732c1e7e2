"""Check-back transactions, worked example: an order row in SQLite and its record in Kafka, both or neither.

Run against a broker (docs/transactions.md, "Check-back transactions" says more):

    eoslog serve --data-dir /tmp/cb-data --set transaction.abort.timed.out.transaction.cleanup.interval.ms=500
    python examples/checkback_sqlite.py --db /tmp/orders.db place 3 --crash-after-db-commit
    python examples/checkback_sqlite.py --db /tmp/orders.db resolve --seconds 10

The first command places three orders and kills itself (SIGKILL) after the last order's database commit,
before the Kafka commit. Its transaction is not aborted when its timeout (5 s here) passes: the broker asks
the group, and the second command -- another instance of the group -- answers from the database: the row is
there, so "commit". Every order row then has exactly one record in `orders-sqlite`, and read_committed
consumers never see a record without its row.

The database side of the pattern: the producer's local transaction inserts (txn_id, 'commit') into
txn_outcomes with the order; the resolver inserts (txn_id, 'rollback') if there is nothing yet. The primary
key lets only the first of the two commit, so a slow producer and the resolver can never both win.
"""

from __future__ import annotations

import argparse
import os
import signal
import sqlite3
import time

from eoslog.client.checkback import CheckBackProducer

# Each example has its own check-back group and topic: a resolver answers every transaction of its group
# from its own database, so two examples sharing a group would answer for each other's transactions
# ("rollback" for a row the other database had committed).
GROUP = "orders-sqlite-example"
TOPIC = "orders-sqlite"
SCHEMA = """
CREATE TABLE IF NOT EXISTS orders (order_id INTEGER PRIMARY KEY, item TEXT NOT NULL, txn_id TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS txn_outcomes (txn_id TEXT PRIMARY KEY, outcome TEXT NOT NULL);
"""


def connect(path: str) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=10, isolation_level=None)  # explicit BEGIN / COMMIT
    db.executescript(SCHEMA)
    return db


def resolver(path: str):
    def resolve(txn_id: str) -> str:
        db = connect(path)
        try:
            db.execute("BEGIN IMMEDIATE")
            db.execute("INSERT OR IGNORE INTO txn_outcomes VALUES (?, 'rollback')", (txn_id,))
            (outcome,) = db.execute("SELECT outcome FROM txn_outcomes WHERE txn_id = ?", (txn_id,)).fetchone()
            db.execute("COMMIT")
            print(f"check-back asked about {txn_id}: {outcome}", flush=True)
            return outcome  # "commit" or "rollback"
        finally:
            db.close()
    return resolve


def place(args) -> None:
    db = connect(args.db)
    first = (db.execute("SELECT max(order_id) FROM orders").fetchone()[0] or 0) + 1
    with CheckBackProducer(args.bootstrap, GROUP, resolver=resolver(args.db),
                           transaction_timeout_ms=args.transaction_timeout_ms) as producer:
        for order in range(first, first + args.count):
            item = f"item-{order}"
            with producer.local_transaction() as txn:
                txn.send(TOPIC, f"{order}:{item}".encode(), key=str(order).encode())  # acknowledged here
                db.execute("BEGIN IMMEDIATE")
                db.execute("INSERT INTO txn_outcomes VALUES (?, 'commit')", (txn.id,))
                db.execute("INSERT INTO orders VALUES (?, ?, ?)", (order, item, txn.id))
                db.execute("COMMIT")
                print(f"order {order} stored under {txn.id}", flush=True)
                if args.crash_after_db_commit and order == first + args.count - 1:
                    print("crashing before the Kafka commit", flush=True)
                    os.kill(os.getpid(), signal.SIGKILL)


def resolve(args) -> None:
    with CheckBackProducer(args.bootstrap, GROUP, resolver=resolver(args.db)):
        time.sleep(args.seconds)  # the background thread answers the broker's checks meanwhile


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--db", default="orders.db")
    commands = parser.add_subparsers(dest="command", required=True)
    placing = commands.add_parser("place", help="place orders, each in one local transaction")
    placing.add_argument("count", type=int)
    placing.add_argument("--crash-after-db-commit", action="store_true")
    placing.add_argument("--transaction-timeout-ms", type=int, default=5000,
                         help="how long before the broker starts asking the group")
    resolving = commands.add_parser("resolve", help="answer the broker's checks for the group a while")
    resolving.add_argument("--seconds", type=float, default=10)
    args = parser.parse_args()
    place(args) if args.command == "place" else resolve(args)


if __name__ == "__main__":
    main()
