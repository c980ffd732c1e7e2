"""Specs of Kafka APIs that the copy shipped with kafka-python 3.0 does not have yet (Kafka 4.x additions
such as ConsumerGroupHeartbeat or the share-group APIs of KIP-932), written by us in Kafka's JSON spec
format from the KIPs that define them. ``protocol.schema`` loads them after kafka-python's copy and before
eoslog's private extensions; a name present in kafka-python's copy always wins, so a newer kafka-python
that ships the API replaces ours without a code change (tests/protocol/test_schema.py checks that the two
sets do not overlap today)."""
