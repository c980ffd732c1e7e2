"""Real ZooKeeper servers (Debian's ``zookeeper`` package), for tests: eoslog.tools.local.zookeeper, which
the commands that start the same use; re-exported here, so tests keep their import."""

from eoslog.tools.local.zookeeper import (
    ZooKeeperEnsemble,
    ZooKeeperNode,
    ZooKeeperUnavailable,
    four_letter_word,
)

__all__ = ["ZooKeeperEnsemble", "ZooKeeperNode", "ZooKeeperUnavailable", "four_letter_word"]
