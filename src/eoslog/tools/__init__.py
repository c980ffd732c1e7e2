"""Operator tools of the `eoslog` CLI, one module per command group."""
