"""``eoslog serve`` as a child process, for tests: eoslog.tools.local.process, which the commands that start
the same use; re-exported here, so tests keep their import."""

from eoslog.tools.local.process import BrokerProcess, free_port

__all__ = ["BrokerProcess", "free_port"]
