"""A fault-injecting TCP proxy that understands Kafka framing, for tests: eoslog.tools.local.faultproxy,
which the commands that start the same use; re-exported here, so tests keep their import."""

from eoslog.tools.local.faultproxy import FaultCounters, FaultEvent, FaultProxy, FaultSettings

__all__ = ["FaultCounters", "FaultEvent", "FaultProxy", "FaultSettings"]
