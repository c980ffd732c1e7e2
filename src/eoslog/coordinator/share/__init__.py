"""The share coordinator (KIP-932): the durable state of every share partition, in ``__share_group_state``.

- ``log_format``: the ShareSnapshot and ShareUpdate records (Kafka 4.x bytes), encode and strict decode.
- ``batches``: combining state batches (Kafka's PersisterStateBatchCombiner).

docs/share-groups.md has the design and the byte layouts.
"""
