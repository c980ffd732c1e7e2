"""A local cluster: a real ZooKeeper and N ``eoslog serve`` processes, for tests: eoslog.tools.local.cluster,
which the commands that start the same use; re-exported here, so tests keep their import."""

from eoslog.tools.local.cluster import CHROOT, ClusterState, EmbeddedCluster, embedded_cluster

__all__ = ["CHROOT", "ClusterState", "EmbeddedCluster", "embedded_cluster"]
