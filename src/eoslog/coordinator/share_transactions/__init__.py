"""Share partitions in transactions (issue 37 step 6, eoslog's extension; docs/share-groups.md, "Step 6:
acknowledgements inside a transaction"): the transaction coordinator's side.

- ``extension``: AddSharePartitionsToTxn over the transaction coordinator's engine interface
  (coordinator/transaction/engine.py): the ``__share_group_state`` partition of each share partition joins
  the producer's transaction, so its marker reaches the share coordinator.
"""
