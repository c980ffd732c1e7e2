"""The nemesis of ``eoslog verify --cluster N``: faults of a replicated cluster, aimed at the brokers that
matter at that moment (read from ZooKeeper just before each fault), on the same seeded schedule of
rounds as the single-node nemesis (faults.py).

| kind | what it does |
|---|---|
| ``leader-kill`` | SIGKILL the leader of a random partition of the test topic, start it again |
| ``coordinator-kill`` | SIGKILL the broker coordinating a worker's transactional id or its group, start it again |
| ``leader-pause`` | SIGSTOP a partition leader for less than the ZooKeeper session timeout, then SIGCONT |
| ``session-expiry`` | SIGSTOP a leader or coordinator past the session timeout: ZooKeeper expires its session, the controller moves its leaderships, and it wakes up a zombie that must find out |
| ``partition`` | cut a partition leader off from every other broker (its fault proxy and theirs close the links), while it keeps ZooKeeper and its clients; then heal |
| ``client-kill`` | SIGKILL one worker process; the runner replaces it (same transactional id) |
| ``proxy-drop`` | every broker's proxy drops (and delays) some responses, inter-broker ones included |
| ``proxy-cut`` | every broker's proxy cuts connections at random frames |
| ``bitflip`` | stop a random broker (SIGTERM or SIGKILL), flip one bit in a stored batch of one of its replicas of the test topic (faults/bitflip.py), start it again: the fetch CRC check refuses it, and the replica, a follower again, cuts it and refetches it. Only when named (``--faults``) |

Every fault is healed before the next one starts: killed brokers run again, paused ones continue,
links are restored.
"""

from __future__ import annotations

import time

from eoslog.protocol.coordinator_partition import partition_for
from eoslog.verify.faults import CUT_RATE, DELAY_RATE, FaultWindow, Nemesis, start_again

CLUSTER_KINDS = ("leader-kill", "coordinator-kill", "leader-pause", "session-expiry", "partition",
                 "client-kill", "proxy-drop", "proxy-cut")
# Only when named (--faults): every broker's data directory is then on LazyFS (eoslog/faults/lazyfs.py).
# power-loss: a leader loses power (SIGKILL, then its unsynced writes dropped or torn); power-loss-all:
# every broker at once, which with fsync off on acknowledgement may lose acknowledged records.
CLUSTER_POWER_KINDS = ("power-loss", "power-loss-all")
# Only when named (--faults), like the power-loss kinds: issue 38's corruption, repaired from the leader.
CLUSTER_BITFLIP_KINDS = ("bitflip",)
RESTART_ATTEMPTS = 3
STATE_READ_TIMEOUT_S = 30.0


class ClusterNemesis(Nemesis):
    """``cluster`` is an EmbeddedCluster started with ``proxied=True``; ``topic`` the workers' topic;
    ``transactional_ids`` the workers' ids (their groups have the same names)."""

    KNOWN_KINDS = CLUSTER_KINDS + CLUSTER_POWER_KINDS + CLUSTER_BITFLIP_KINDS

    def __init__(self, kinds, *, seed: int, cluster, topic: str, transactional_ids: list[str],
                 internal_partitions: int, disks: dict | None = None, **kwargs) -> None:
        super().__init__(kinds, seed=seed, **kwargs)
        if set(kinds) & set(CLUSTER_POWER_KINDS) and not disks:
            raise ValueError("power-loss needs every broker's data directory on LazyFS (disks)")
        self.disks = disks or {}  # broker id -> faults.lazyfs.LazyMount holding its data directory
        self.cluster = cluster
        self.topic = topic
        self.transactional_ids = transactional_ids
        self.internal_partitions = internal_partitions
        self._paused: set[int] = set()

    def heal(self) -> None:
        for proxy in self.cluster.proxies.values():
            proxy.set_faults(drop_response_rate=0.0, delay_response_rate=0.0, cut_rate=0.0)
        self.cluster.heal_links()
        for broker_id in list(self._paused):
            self.cluster.broker(broker_id).resume()
            self._paused.discard(broker_id)
        for broker_id, broker in self.cluster.brokers.items():
            if broker.process is None or broker.process.poll() is not None:
                self._restart(broker_id)

    # ---- choosing a target ------------------------------------------------------------------------

    def _state(self):
        """What ZooKeeper says, asked again while our client moves to another ZooKeeper node."""
        from kazoo.exceptions import ConnectionLoss, SessionExpiredError

        deadline = time.monotonic() + STATE_READ_TIMEOUT_S
        while True:
            try:
                return self.cluster.state()
            except (ConnectionLoss, SessionExpiredError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def _leader(self) -> int | None:
        state = self._state()
        leaders = [state.leader_of(t, p) for (t, p) in state.partitions if t == self.topic]
        leaders = [b for b in leaders if b is not None and b > 0]
        return self.random.choice(sorted(leaders)) if leaders else None

    def _coordinator(self) -> tuple[int | None, str]:
        transactional_id = self.random.choice(self.transactional_ids)
        topic = self.random.choice(["__transaction_state", "__consumer_offsets"])
        leader = self._state().leader_of(topic, partition_for(transactional_id, self.internal_partitions))
        role = "transaction" if topic == "__transaction_state" else "group"
        return (leader if leader is not None and leader > 0 else None), f"{role} coordinator of {transactional_id}"

    # ---- faults -----------------------------------------------------------------------------------

    def _inject(self, kind: str) -> None:
        hold = self.random.uniform(*self.fault_seconds)
        start = time.time()
        session_s = self.cluster.session_timeout_ms / 1000
        if kind in ("leader-kill", "coordinator-kill"):
            victim, what = (self._leader(), "leader") if kind == "leader-kill" else self._coordinator()
            if victim is None:
                detail = f"no {what} right now"
            else:
                self.cluster.broker(victim).kill()
                self._wait(self.random.uniform(0.2, 1.0))
                took = self._restart(victim)
                detail = f"broker {victim} ({what}) restarted in {took:.2f} s"
        elif kind in ("leader-pause", "session-expiry"):
            if kind == "leader-pause":
                victim, what = self._leader(), "leader"
                hold = self.random.uniform(0.3, session_s / 2)
            else:
                victim, what = (self._leader(), "leader") if self.random.random() < 0.5 else self._coordinator()
                hold = session_s + self.random.uniform(1.0, 3.0)
            if victim is None:
                detail = f"no {what} right now"
            else:
                self.cluster.broker(victim).pause()
                self._paused.add(victim)
                self._wait(hold)
                self.cluster.broker(victim).resume()
                self._paused.discard(victim)
                detail = f"broker {victim} ({what}) stopped for {hold:.1f} s"
        elif kind == "partition":
            victim = self._leader()
            if victim is None:
                detail = "no leader right now"
            else:
                for other in self.cluster.brokers:
                    if other != victim:
                        self.cluster.cut(victim, other)
                self._wait(hold)
                self.cluster.heal_links()
                detail = f"broker {victim} cut off from the other brokers for {hold:.1f} s"
        elif kind in CLUSTER_POWER_KINDS:
            victims = sorted(self.cluster.brokers) if kind == "power-loss-all" else [
                self._leader() or self.random.choice(sorted(self.cluster.brokers))]
            for victim in victims:  # all dead before any disk forgets: no survivor to copy from
                self.cluster.broker(victim).kill()
            torn_seed = self.random.getrandbits(32) if self.random.random() < 0.5 else None
            lost = [self.disks[victim].power_loss(torn_seed)[0] for victim in victims]
            self._wait(self.random.uniform(0.2, 1.0))
            took = [self._restart(victim) for victim in victims]
            detail = (f"broker(s) {', '.join(map(str, victims))}: unsynced writes to {sum(lost)} file(s) "
                      f"{'torn' if torn_seed is not None else 'dropped'}, restarted in {max(took):.2f} s")
        elif kind == "bitflip":
            detail = self._bitflip()
        elif kind == "client-kill":
            detail = self.kill_client() or "no client running"
        elif kind == "proxy-drop":
            self._all_proxies(drop_response_rate=self.drop_rate, delay_response_rate=DELAY_RATE)
            self._wait(hold)
            self._all_proxies(drop_response_rate=0.0, delay_response_rate=0.0)
            detail = f"drop={self.drop_rate:g} delay={DELAY_RATE:g} on every broker for {hold:.1f} s"
        elif kind == "proxy-cut":
            self._all_proxies(cut_rate=CUT_RATE)
            self._wait(hold)
            self._all_proxies(cut_rate=0.0)
            detail = f"cut={CUT_RATE:g} on every broker for {hold:.1f} s"
        else:
            raise AssertionError(kind)
        window = FaultWindow(start, time.time(), kind, detail)
        self.windows.append(window)
        self.counts[kind] += 1
        self.log(f"{kind}: {detail}")

    def _bitflip(self) -> str:
        import os

        from eoslog.faults.bitflip import flip_bit

        victim = self.random.choice(sorted(self.cluster.brokers))
        broker = self.cluster.broker(victim)
        how = self.random.choice(["terminate", "kill"])
        getattr(broker, how)()
        data_dir = broker.data_dir
        replicas = sorted(name for name in os.listdir(data_dir) if name.startswith(f"{self.topic}-")
                          and name[len(self.topic) + 1:].isdigit())
        self.random.shuffle(replicas)
        flipped = "no stored batch to flip"
        for name in replicas:
            try:
                flip = flip_bit(str(data_dir / name), self.random)
            except ValueError:
                continue
            flipped = (f"{name}: bit {flip.bit} of byte {flip.byte} of {os.path.basename(flip.path)}, "
                       f"batch {flip.base_offset}..{flip.last_offset}")
            break
        self._wait(self.random.uniform(0.2, 1.0))
        took = self._restart(victim)
        return f"broker {victim} ({'SIGTERM' if how == 'terminate' else 'SIGKILL'}): {flipped}, restarted in {took:.2f} s"

    def _all_proxies(self, **rates: float) -> None:
        for proxy in self.cluster.proxies.values():
            proxy.set_faults(**rates)

    def _restart(self, broker_id: int) -> float:
        return start_again(self.cluster.broker(broker_id), f"broker {broker_id}", RESTART_ATTEMPTS, timeout=60)
