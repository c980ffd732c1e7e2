"""eoslog's own protocol clients, on the generated codec (eoslog.protocol.codec): one blocking connection
to a broker (connection.py), which the admin tools and the Spark source speak through too, a blocking
coordinator client with the transaction-group APIs (txn_groups.py), a producer (producer.py) and the
check-back client (checkback.py, built on the producer). The Spark sink (eoslog.spark) is built on them
too; the broker never imports this package."""
