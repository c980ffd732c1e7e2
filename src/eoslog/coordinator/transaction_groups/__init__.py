"""Transaction groups (eoslog's extension: one decision over several transactions, docs/spark.md,
"Broker extension: transaction groups"; docs/transactions.md, "Transaction groups").

- ``log_format``: the group record in ``__transaction_state`` (key version 0x7E00) and the group state table.
- ``decisions``: the pure decisions (commit, member roll-forward, abort by prefix).
- ``extension``: CommitTransactionGroup / DescribeTransactionGroups / AbortTransactionsByPrefix over the
  transaction coordinator's engine interface (coordinator/transaction/engine.py).
"""
