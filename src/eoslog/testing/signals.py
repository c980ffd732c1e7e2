"""Pausing a child process with SIGSTOP, for tests: eoslog.tools.local.signals, which the commands that start
the same use; re-exported here, so tests keep their import."""

from eoslog.tools.local.signals import stop_process, thread_states

__all__ = ["stop_process", "thread_states"]
