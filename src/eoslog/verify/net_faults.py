"""The nemesis of ``eoslog verify --cluster N --net namespaces``: the cluster nemesis's process faults, plus
network partitions made of lost packets (faults/netns.py, faults/nftables.py), each aimed by reading the
cluster's state from ZooKeeper first.

| kind | what is cut |
|---|---|
| ``isolate-leader`` | a partition leader from every ZooKeeper node and every other broker (the controller included); clients still reach it: the ZooKeeper-mode split brain |
| ``isolate-controller`` | the controller from ZooKeeper and the other brokers; clients still reach it |
| ``majority-split`` | the brokers into a majority with ZooKeeper (its majority, with 3 nodes) and a minority (half the time holding the controller) |
| ``one-way-loss`` | everything a leader sends to ZooKeeper and the other brokers, or everything they send it |
| ``bridge`` | every host into two sides that cannot talk, but for one broker that talks to both |
| ``isolate-zookeeper`` | one ZooKeeper node of three (its leader half the time) from every other host |

The process kinds, ``power-loss`` and ``bitflip`` (only when named) are the cluster nemesis's.
``partition`` keeps its meaning (a leader cut off from the other brokers, ZooKeeper kept) with nftables
instead of proxies. Each fault holds between half the ZooKeeper session timeout and twice it: the
shorter ones end before the session can expire, so nothing should move; the longer ones force the
controller to act. Every cut is healed before the next fault (``Network.heal`` empties the chain).
"""

from __future__ import annotations

import time

from eoslog.faults import nftables
from eoslog.verify.cluster_faults import CLUSTER_BITFLIP_KINDS, CLUSTER_POWER_KINDS, ClusterNemesis
from eoslog.verify.faults import CUT_SHORT, FaultWindow

PROCESS_KINDS = ("leader-kill", "coordinator-kill", "leader-pause", "session-expiry", "partition", "client-kill")
PARTITION_KINDS = ("isolate-leader", "isolate-controller", "majority-split", "one-way-loss", "bridge",
                   "isolate-zookeeper")
NET_KINDS = PROCESS_KINDS + PARTITION_KINDS
NEEDS_ZOOKEEPER_ENSEMBLE = ("isolate-zookeeper",)


def default_kinds(zookeeper_nodes: int) -> tuple[str, ...]:
    return tuple(k for k in NET_KINDS if zookeeper_nodes == 3 or k not in NEEDS_ZOOKEEPER_ENSEMBLE)


class NetNemesis(ClusterNemesis):
    """``cluster`` is an EmbeddedCluster started with ``network=`` (a created faults.netns.Network)."""

    KNOWN_KINDS = NET_KINDS + CLUSTER_POWER_KINDS + CLUSTER_BITFLIP_KINDS  # the last two only when named

    def __init__(self, kinds, **kwargs) -> None:
        super().__init__(kinds, **kwargs)
        self.network = self.cluster.network
        if self.network is None:
            raise ValueError("the namespace nemesis needs a cluster in network namespaces")
        if set(kinds) & set(NEEDS_ZOOKEEPER_ENSEMBLE) and len(self.cluster.zookeeper.nodes) != 3:
            raise ValueError("isolate-zookeeper needs a ZooKeeper ensemble of 3 nodes")

    # ---- addresses ----------------------------------------------------------------------------------

    def broker_addresses(self, ids=None) -> list[str]:
        return [self.network.broker_address(b) for b in (ids if ids is not None else sorted(self.cluster.brokers))]

    def zookeeper_addresses(self) -> list[str]:
        return [node.host for node in self.cluster.zookeeper.nodes]

    # ---- the partitions, each aimed and returned as (drops, description) ----------------------------------

    def isolate_leader(self, victim: int | None = None) -> tuple[set[nftables.Drop], str]:
        victim = victim if victim is not None else self._leader()
        if victim is None:
            return set(), "no leader right now"
        others = self.zookeeper_addresses() + self.broker_addresses([b for b in self.cluster.brokers if b != victim])
        return nftables.split(self.broker_addresses([victim]), others), \
            f"leader {victim} cut off from ZooKeeper and the other brokers; clients still reach it"

    def isolate_controller(self) -> tuple[set[nftables.Drop], str]:
        controller = self._state().controller
        if controller not in self.cluster.brokers:
            return set(), "no controller right now"
        others = self.zookeeper_addresses() + self.broker_addresses([b for b in self.cluster.brokers if b != controller])
        return nftables.split(self.broker_addresses([controller]), others), \
            f"controller {controller} cut off from ZooKeeper and the other brokers; clients still reach it"

    def majority_split(self, minority: list[int] | None = None) -> tuple[set[nftables.Drop], str]:
        brokers = sorted(self.cluster.brokers)
        if minority is None:
            self.random.shuffle(brokers)
            controller = self._state().controller
            if controller in brokers and self.random.random() < 0.5:  # half the time the controller is outvoted
                brokers.remove(controller)
                brokers.insert(0, controller)
            minority = brokers[:len(brokers) // 2 or 1]
        majority = [b for b in brokers if b not in minority]
        zookeeper = self.zookeeper_addresses()
        zk_minority = zookeeper[: len(zookeeper) // 2]  # none of one node, one of three
        side_a = self.broker_addresses(minority) + zk_minority
        side_b = self.broker_addresses(majority) + [z for z in zookeeper if z not in zk_minority]
        detail = (f"brokers {sorted(minority)}{' and a ZooKeeper node' if zk_minority else ''} split from "
                  f"brokers {sorted(majority)} and ZooKeeper's majority")
        return nftables.split(side_a, side_b), detail

    def one_way_loss(self, victim: int | None = None, outgoing: bool | None = None
                     ) -> tuple[set[nftables.Drop], str]:
        victim = victim if victim is not None else self._leader()
        if victim is None:
            return set(), "no leader right now"
        outgoing = outgoing if outgoing is not None else self.random.random() < 0.5
        me = self.network.broker_address(victim)
        others = self.zookeeper_addresses() + self.broker_addresses([b for b in self.cluster.brokers if b != victim])
        drops = {nftables.Drop(me, o) if outgoing else nftables.Drop(o, me) for o in others}
        return drops, (f"leader {victim}'s packets to ZooKeeper and the other brokers lost" if outgoing
                       else f"packets from ZooKeeper and the other brokers to leader {victim} lost")

    def bridge(self, middle: int | None = None, side_a: list[str] | None = None, side_b: list[str] | None = None
               ) -> tuple[set[nftables.Drop], str]:
        """``side_a``/``side_b`` are addresses; by default every host but the middle broker and the
        clients, shuffled into two halves."""
        brokers = sorted(self.cluster.brokers)
        middle = middle or self._leader() or self.random.choice(brokers)
        if side_a is None or side_b is None:
            rest = self.broker_addresses([b for b in brokers if b != middle]) + self.zookeeper_addresses()
            self.random.shuffle(rest)
            side_a, side_b = rest[:len(rest) // 2], rest[len(rest) // 2:]
        def names(side: list[str]) -> str:
            return ", ".join(self.network.host_of(a).name for a in sorted(side))

        return nftables.split(side_a, side_b), f"[{names(side_a)}] and [{names(side_b)}] apart, broker {middle} talks to both"

    def isolate_zookeeper(self, node_id: int | None = None) -> tuple[set[nftables.Drop], str]:
        nodes = self.cluster.zookeeper.nodes
        if node_id is None:
            leader = self.cluster.zookeeper.leader()
            node = leader if leader is not None and self.random.random() < 0.5 else self.random.choice(nodes)
        else:
            node = self.cluster.zookeeper.node(node_id)
        role = node.mode() or "not serving"
        others = [h.address for h in self.network.hosts.values() if h.address != node.host]
        return nftables.split([node.host], others), f"ZooKeeper node {node.node_id} ({role}) cut off from every host"

    # ---- injecting ------------------------------------------------------------------------------------

    def _inject(self, kind: str) -> None:
        if kind not in PARTITION_KINDS:
            super()._inject(kind)
            return
        start = time.time()
        session_s = self.cluster.session_timeout_ms / 1000
        hold = self.random.uniform(session_s / 2, session_s * 2 + 2)
        drops, detail = getattr(self, kind.replace("-", "_"))()
        if drops:
            self.network.add_drops(drops)
            cut = self._wait(hold)
            self.network.heal()
            detail += f" for {hold:.1f} s" + (f" ({CUT_SHORT})" if cut else "")
        window = FaultWindow(start, time.time(), kind, detail)
        self.windows.append(window)
        self.counts[kind] += 1
        self.log(f"{kind}: {detail}")
