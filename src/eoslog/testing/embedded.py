"""A real broker in this process, for tests: eoslog.tools.local.embedded, which the commands that start the
same use; re-exported here, so tests keep their import."""

from eoslog.tools.local.embedded import EmbeddedBroker, embedded_broker

__all__ = ["EmbeddedBroker", "embedded_broker"]
