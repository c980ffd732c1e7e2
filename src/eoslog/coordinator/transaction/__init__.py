"""The transaction coordinator (KIP-98 two-phase commit over __transaction_state): its sans-IO core and its shard.

- ``state``: TransactionState (persisted ids) and the one table of valid previous states.
- ``metadata``: TransactionMetadata and its prepare -> log -> apply transitions (TxnTransitMetadata).
- ``decisions``: one pure handler per API (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
  markers written, timeouts, id expiration) returning a Decision for the I/O shell to carry out.
- ``log_format``: the __transaction_state key/value bytes, partition_for, load_state, recovery_actions.
- ``producer_id_block``: producer ids in persisted blocks, never reused after a crash.
- ``checkback``: the check-back policy (the Checking state's schedule, coordinator/check_back/ carries it out).
- The I/O side: ``shard`` (on the coordinator runtime: the cache, carrying out, completions, timers),
  ``apis`` (the APIs), ``markers`` (marker writing), ``producer_ids``; ``engine`` is what extensions
  (coordinator/transaction_groups/, coordinator/check_back/) may use of it.

docs/transactions.md has the design notes and the byte layouts.
"""
