"""How every eoslog ZooKeeper client tries to reach ZooKeeper again after losing its connection.

kazoo's default doubles its sleep between tries without a useful bound (max_delay 3600 s): ZooKeeper
away for 6 s means the next try 6.4 s later (±40 % jitter), away for 13 s means 12.8 s later. A
restarted server reloads every session and gives each its whole timeout again from the moment it
serves, so a client that comes back later than that has lost its session although the server was back
in time: a 10 s session lost to a ZooKeeper restart that took 8 s. ZooKeeper's Java client (Kafka's)
sleeps at most a second between tries; so do we, and a quarter of the session when that is shorter,
so a client tries several times within any session timeout."""

from __future__ import annotations

from kazoo.retry import KazooRetry

RECONNECT_MAX_DELAY_S = 1.0


def connection_retry(session_timeout_s: float) -> KazooRetry:
    """kazoo's ``connection_retry`` for a session of ``session_timeout_s``: forever, every 0.1 s at first,
    then at most every ``min(1 s, session / 4)`` (plus kazoo's jitter, up to 40 % more)."""
    return KazooRetry(max_tries=-1, delay=0.1, backoff=2,
                      max_delay=min(RECONNECT_MAX_DELAY_S, session_timeout_s / 4))
