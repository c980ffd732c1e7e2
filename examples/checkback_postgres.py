"""Check-back transactions, worked example: an order row in PostgreSQL and its record in Kafka, both or neither.

The same flow as examples/checkback_sqlite.py, with a PostgreSQL database given as a DSN (libpq's
"host=... dbname=..." or a postgresql:// URL; psycopg 3 needed: pip install 'psycopg[binary]'). Run against
a broker (docs/transactions.md, "Check-back transactions" says more):

    eoslog serve --data-dir /tmp/cb-data --set transaction.abort.timed.out.transaction.cleanup.interval.ms=500
    python examples/checkback_postgres.py --dsn "host=127.0.0.1 dbname=orders" place 3 --crash-after-db-commit
    python examples/checkback_postgres.py --dsn "host=127.0.0.1 dbname=orders" resolve --seconds 10

The first command places three orders and kills itself (SIGKILL) after the last order's database commit,
before the Kafka commit. After its transaction timeout (5 s here) the broker asks the group instead of
aborting, and the second command -- another instance of the group -- answers from the database: the row is
there, so "commit". Every order row then has exactly one record in `orders-postgres`.

The database decides each transaction exactly once, even when the producer is slow rather than dead and
its database transaction runs at the same moment as the resolver's:

- the producer's local transaction inserts (txn_id, 'commit') into txn_outcomes with the order row;
- the resolver runs one statement, INSERT (txn_id, 'rollback') ON CONFLICT DO UPDATE ... RETURNING outcome:
  it inserts 'rollback' if there is no row, and otherwise returns the row that is there. If the producer's
  insert is still uncommitted, PostgreSQL makes the resolver wait for it on the primary key: a commit
  makes the resolver return 'commit', a rollback lets it insert 'rollback'. If the resolver's row came
  first, the producer's insert fails on the primary key, its database transaction rolls back and the
  `with` block aborts the Kafka transaction too.
"""

from __future__ import annotations

import argparse
import os
import signal
import time

import psycopg

from eoslog.client.checkback import CheckBackProducer

# Each example has its own check-back group and topic: a resolver answers every transaction of its group
# from its own database, so two examples sharing a group would answer for each other's transactions
# ("rollback" for a row the other database had committed).
GROUP = "orders-postgres-example"
TOPIC = "orders-postgres"
SCHEMA = """
CREATE TABLE IF NOT EXISTS orders (order_id integer PRIMARY KEY, item text NOT NULL, txn_id text NOT NULL);
CREATE TABLE IF NOT EXISTS txn_outcomes (txn_id text PRIMARY KEY,
                                         outcome text NOT NULL CHECK (outcome IN ('commit', 'rollback')));
"""
# One statement, so it is atomic under READ COMMITTED: an INSERT ... ON CONFLICT DO NOTHING followed by a
# SELECT would work too, but DO UPDATE also locks the row it returns. The no-op SET keeps the outcome.
DECIDE = """
INSERT INTO txn_outcomes (txn_id, outcome) VALUES (%s, 'rollback')
ON CONFLICT (txn_id) DO UPDATE SET outcome = txn_outcomes.outcome
RETURNING outcome
"""


def connect(dsn: str) -> psycopg.Connection:
    db = psycopg.connect(dsn)  # each `with db.transaction()` below is one BEGIN ... COMMIT
    with db.transaction():
        db.execute(SCHEMA)
    return db


def resolver(dsn: str):
    def resolve(txn_id: str) -> str:
        # A connection per check: the resolver may run on several poller threads at once, and a psycopg
        # connection runs one transaction at a time.
        with psycopg.connect(dsn) as db, db.transaction():
            (outcome,) = db.execute(DECIDE, (txn_id,)).fetchone()
        print(f"check-back asked about {txn_id}: {outcome}", flush=True)
        return outcome  # "commit" or "rollback"
    return resolve


def place(args) -> None:
    db = connect(args.dsn)
    first = (db.execute("SELECT max(order_id) FROM orders").fetchone()[0] or 0) + 1
    db.commit()  # end the SELECT's implicit transaction: each order below is its own transaction
    with CheckBackProducer(args.bootstrap, GROUP, resolver=resolver(args.dsn),
                           transaction_timeout_ms=args.transaction_timeout_ms) as producer:
        for order in range(first, first + args.count):
            item = f"item-{order}"
            with producer.local_transaction() as txn:
                txn.send(TOPIC, f"{order}:{item}".encode(), key=str(order).encode())  # acknowledged here
                with db.transaction():
                    db.execute("INSERT INTO txn_outcomes VALUES (%s, 'commit')", (txn.id,))
                    db.execute("INSERT INTO orders VALUES (%s, %s, %s)", (order, item, txn.id))
                print(f"order {order} stored under {txn.id}", flush=True)
                if args.crash_after_db_commit and order == first + args.count - 1:
                    print("crashing before the Kafka commit", flush=True)
                    os.kill(os.getpid(), signal.SIGKILL)


def resolve(args) -> None:
    connect(args.dsn).close()  # the tables, should the resolver start first
    with CheckBackProducer(args.bootstrap, GROUP, resolver=resolver(args.dsn)):
        time.sleep(args.seconds)  # the background thread answers the broker's checks meanwhile


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--dsn", required=True, help='e.g. "host=127.0.0.1 dbname=orders user=app"')
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
