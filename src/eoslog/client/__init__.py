"""eoslog's own protocol clients, on the generated codec (eoslog.protocol.codec): one blocking connection
to a broker (connection.py), which the admin tools and the Spark source speak through too, a blocking
coordinator client with the transaction-group APIs (txn_groups.py) and a producer (producer.py). The Spark
sink (eoslog.spark) and the check-back client (eoslog.checkback) are built on them; the broker never
imports this package."""
