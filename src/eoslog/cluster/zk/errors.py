"""Errors of the ZooKeeper layer, importable without kazoo (a single node never loads kazoo)."""


class ZooKeeperError(RuntimeError):
    """ZooKeeper cannot be reached, or the cluster there refuses this broker (the message says why)."""


class NotController(RuntimeError):
    """A controller write was refused: another controller has been elected since (epoch znode moved)."""
