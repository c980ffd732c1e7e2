"""The share coordinator (KIP-932): the durable state of every share partition, in ``__share_group_state``.

- ``log_format``: the ShareSnapshot and ShareUpdate records (Kafka 4.x bytes), encode and strict decode.
- ``batches``: combining state batches (Kafka's PersisterStateBatchCombiner).
- ``state``: the pure core, ShareStates: one ``__share_group_state`` partition's share partitions, the
  decisions of Initialize/Write/Read/ReadSummary/DeleteShareGroupState, applying and loading records.
- ``config``: the share.coordinator.* settings it reads.
- ``shard``: ShareShard, the core on the coordinator runtime (ownership, durable writes, the timers).

docs/share-groups.md has the design and the byte layouts.
"""
