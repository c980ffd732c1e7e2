"""eoslog's cluster metadata in ZooKeeper, in Kafka's ZooKeeper-mode layout (docs/cluster.md)."""
