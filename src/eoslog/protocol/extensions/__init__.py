"""eoslog's private APIs as message specs in Kafka's JSON format (api keys from 0x7E00 up, a range no
Kafka release uses). ``protocol.schema`` loads them beside Kafka's, so the generated codec and
``messages`` serve them like any other API. The semantics are in docs/spark.md ("Broker extension:
transaction groups")."""
