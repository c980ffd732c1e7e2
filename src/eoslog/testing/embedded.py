"""A real broker in this process, for tests: eoslog.server.embedded, which the commands that start the
same use; re-exported here, so tests keep their import."""

from eoslog.server.embedded import EmbeddedBroker, embedded_broker

__all__ = ["EmbeddedBroker", "embedded_broker"]
