"""The transaction coordinator's sans-IO core (KIP-98 two-phase commit over __transaction_state).

- ``state``: TransactionState (persisted ids) and the one table of valid previous states.
- ``metadata``: TransactionMetadata and its prepare -> log -> apply transitions (TxnTransitMetadata).
- ``decisions``: one pure handler per API (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
  markers written, timeouts, id expiration) returning a Decision for the I/O shell to carry out.
- ``log_format``: the __transaction_state key/value bytes, partition_for, load_state, recovery_actions.
- ``producer_id_block``: producer ids in persisted blocks, never reused after a crash.
- ``group_log_format`` / ``group_decisions``: eoslog's transaction groups (one decision over several
  transactions, docs/spark.md), their __transaction_state record and their pure decisions; ``groups``
  and ``coordinator`` are the I/O shell.

docs/transactions.md has the design notes and the byte layouts.
"""
