"""A Jepsen-style exactly-once verifier: record a history of transactions (history.py), then check it
(checker.py) and plot it (plot.py, needs matplotlib). The format and the anomalies are documented in
docs/reliability.md."""

from eoslog.verify.checker import ANOMALIES, KAFKA_ALLOWED, Report, check
from eoslog.verify.history import (
    Event,
    HistoryError,
    HistoryWriter,
    Poll,
    Send,
    Txn,
    pair,
    poll,
    read_history,
    send,
    write_history,
)

__all__ = ["ANOMALIES", "KAFKA_ALLOWED", "Event", "HistoryError", "HistoryWriter", "Poll", "Report", "Send",
           "Txn", "check", "pair", "poll", "read_history", "send", "write_history"]
