"""eoslog: a Kafka-compatible streaming log broker with exactly-once semantics."""

__version__ = "0.1.0"
