"""The controller: one broker at a time, elected through ZooKeeper's ``/controller`` ephemeral znode,
turns what ZooKeeper says (live brokers, assignments, partition states) into leader decisions.

Contract
- Only the active controller writes leaders and leader epochs, and only with a transaction that also
  checks the ``/controller_epoch`` znode version it bumped when elected: a deposed controller cannot
  write (cluster/zk/client.py). Its decisions are the pure functions of cluster/election.py.
- It reacts to every new cluster view (brokers joining or leaving, topics created, ISR changes) by
  reconciling every partition; a write that loses a race (znode version moved) is retried on the view
  that the race produced.
- Brokers learn decisions by watching the state znodes (the role Kafka's LeaderAndIsr requests play).
- A view can be older than our own election (read while we were creating ``/controller``): whether we
  hold the znode is asked of ZooKeeper itself before resigning, and a znode we hold without acting on it
  is deleted, so that an election always runs again.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from eoslog.cluster import election
from eoslog.cluster.zk.errors import NotController
from eoslog.cluster.zk.layout import ClusterView, PartitionState, TopicAssignment

if TYPE_CHECKING:
    from eoslog.cluster.zk.client import ZooKeeper

log = logging.getLogger(__name__)


class Controller:
    def __init__(self, zk: ZooKeeper, broker_id: int, *, unclean_default: bool = False,
                 auto_leader_rebalance: bool = True, imbalance_check_interval_s: float = 300.0,
                 imbalance_per_broker_percentage: int = 10) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.unclean_default = unclean_default
        self.auto_leader_rebalance = auto_leader_rebalance
        self.imbalance_check_interval_s = imbalance_check_interval_s
        self.imbalance_ratio = imbalance_per_broker_percentage / 100
        self.active = False
        self.epoch = 0
        self._epoch_version = -1
        self._view: ClusterView | None = None
        self._lock = asyncio.Lock()
        self._dirty = False
        self._rebalance_task: asyncio.Task | None = None
        self.elected_at_monotonic: float | None = None

    async def on_view(self, view: ClusterView) -> None:
        """Every new view: stand for election when there is no controller; reconcile when we are it."""
        self._view = view
        if self._lock.locked():
            self._dirty = True  # the running pass reconciles again with this view
            return
        async with self._lock:
            while True:
                self._dirty = False
                view = self._view
                if view.controller_id != self.broker_id and self.active:
                    # A view read while we were being elected still names the previous controller (or
                    # none): only ZooKeeper itself says whether we lost the znode.
                    if await asyncio.to_thread(self.zk.controller_owner, self.broker_id) != "us":
                        self._resign(f"broker {view.controller_id} is controller now")
                elif (view.controller_id == self.broker_id and not self.active
                      and await asyncio.to_thread(self.zk.controller_owner, self.broker_id) == "us"):
                    # The znode is ours but we do not act on it (an election that failed half-way, after
                    # the create): give it up, or no broker would ever stand again.
                    log.warning("broker %d holds /controller without acting as controller; resigning "
                                "so that an election runs", self.broker_id)
                    await asyncio.to_thread(self.zk.resign_controller, self.broker_id)
                if view.controller_id == -1 and not self.active:
                    await self._stand()
                if self.active and view.controller_id == self.broker_id:
                    await self._reconcile(view)
                if not self._dirty:
                    return

    async def _stand(self) -> None:
        won = await asyncio.to_thread(self.zk.try_become_controller, self.broker_id)
        if won is None:
            return
        self.epoch, self._epoch_version = won
        self.active = True
        self.elected_at_monotonic = asyncio.get_running_loop().time()
        log.info("broker %d is the controller (controller epoch %d)", self.broker_id, self.epoch)
        if self.auto_leader_rebalance and self._rebalance_task is None:
            self._rebalance_task = asyncio.get_running_loop().create_task(self._rebalance_loop())
        # Our own /controller znode shows up in the next view; reconcile then.

    def _resign(self, reason: str) -> None:
        if self.active:
            log.info("broker %d is no longer the controller: %s", self.broker_id, reason)
        self.active = False
        if self._rebalance_task is not None:
            self._rebalance_task.cancel()
            self._rebalance_task = None

    def session_lost(self) -> None:
        self._resign("ZooKeeper session expired")

    async def stop(self) -> None:
        was_active = self.active
        self._resign("shutting down")
        if was_active:
            await asyncio.to_thread(self.zk.resign_controller, self.broker_id)

    # ---- decisions ---------------------------------------------------------------------------------------

    def _unclean(self, view: ClusterView, topic: str) -> bool:
        value = view.configs.get(topic, {}).get("unclean.leader.election.enable")
        return self.unclean_default if value is None else value.strip().lower() == "true"

    def plan(self, view: ClusterView, *, preferred: set[tuple[str, int]] | None = None
             ) -> list[tuple[str, int, PartitionState, str]]:
        """Every state znode write this view calls for: (topic, partition, new state, reason)."""
        live = set(view.brokers)
        writes = []
        for topic, assignment in view.topics.items():
            unclean = self._unclean(view, topic)
            for index, replicas in assignment.replicas.items():
                state = view.states.get((topic, index))
                if state is None:
                    decision = election.initial_state(replicas, live)
                    if decision is not None:
                        writes.append((topic, index, PartitionState(
                            decision.leader, 0, decision.isr, self.epoch, -1), decision.reason))
                    continue
                decision = election.next_state(replicas, state, live, unclean=unclean,
                                               preferred=preferred is not None and (topic, index) in preferred,
                                               restarted=_registered_since(view, state))
                if decision is not None:
                    writes.append((topic, index, PartitionState(
                        decision.leader, state.leader_epoch + 1, decision.isr, self.epoch, state.zk_version),
                        decision.reason))
        return writes

    def plan_reassignments(self, view: ClusterView) -> list[tuple[TopicAssignment, list[tuple[int, PartitionState]]]]:
        """KIP-455: a partition whose target replicas are all in the ISR finishes its reassignment: the
        leader moves into the target if it is outside, the ISR drops the removed replicas (epoch bump),
        and the assignment becomes the target."""
        finished = []
        for topic, assignment in view.topics.items():
            if not assignment.adding and not assignment.removing:
                continue
            replicas, adding, removing = dict(assignment.replicas), dict(assignment.adding), dict(assignment.removing)
            states = []
            for index in set(assignment.adding) | set(assignment.removing):
                state = view.states.get((topic, index))
                target = assignment.target(index)
                if state is None or state.leader == -1 or not set(target) <= set(state.isr):
                    continue
                leader = state.leader if state.leader in target else next(
                    (r for r in target if r in state.isr and r in view.brokers), -1)
                if leader == -1:
                    continue
                isr = tuple(r for r in state.isr if r in target)
                states.append((index, PartitionState(leader, state.leader_epoch + 1, isr, self.epoch, state.zk_version)))
                replicas[index] = target
                adding.pop(index, None)
                removing.pop(index, None)
            if states:
                finished.append((TopicAssignment(topic, assignment.topic_id, replicas, adding, removing), states))
        return finished

    async def _reconcile(self, view: ClusterView, preferred: set[tuple[str, int]] | None = None) -> int:
        writes = self.plan(view, preferred=preferred)
        reassignments = self.plan_reassignments(view) if not writes else []
        if not writes and not reassignments:
            return 0
        try:
            done = await asyncio.to_thread(self._write_all, writes)
            for assignment, states in reassignments:
                if await asyncio.to_thread(self.zk.finish_reassignment_as_controller, assignment, states,
                                           self._epoch_version):
                    done += 1
                    log.info("controller: reassignment of %s finished for partitions %s", assignment.name,
                             [p for p, _ in states])
        except NotController as exc:
            self._resign(str(exc))
            return 0
        return done

    def _write_all(self, writes) -> int:
        outcomes = self.zk.write_states_as_controller([(topic, index, state) for topic, index, state, _ in writes],
                                                      self._epoch_version)
        done = 0
        for (topic, index, state, reason), written in zip(writes, outcomes, strict=True):
            if written:
                done += 1
                log.info("controller: %s-%d leader %d epoch %d ISR %s (%s)", topic, index, state.leader,
                         state.leader_epoch, list(state.isr), reason)
        return done

    # ---- preferred leaders --------------------------------------------------------------------------------

    async def elect_leaders(self, partitions: list[tuple[str, int]] | None, unclean: bool
                            ) -> dict[tuple[str, int], str | None]:
        """ElectLeaders: per partition None (done), or the name of the error Kafka would give."""
        view = self._view
        if view is None or not self.active:
            raise NotController("not the controller")
        live = set(view.brokers)
        wanted = partitions if partitions is not None else [
            (t, p) for t, a in view.topics.items() for p in a.replicas]
        results: dict[tuple[str, int], str | None] = {}
        writes = []
        for tp in wanted:
            assignment = view.topics.get(tp[0])
            state = view.states.get(tp)
            if assignment is None or tp[1] not in assignment.replicas or state is None:
                results[tp] = "UNKNOWN_TOPIC_OR_PARTITION"
                continue
            replicas = assignment.replicas[tp[1]]
            decide = election.elect_unclean if unclean else election.elect_preferred
            decision = decide(replicas, state, live)
            if decision is None:
                if unclean:
                    leader_live = state.leader in live
                    results[tp] = "ELECTION_NOT_NEEDED" if leader_live else "ELIGIBLE_LEADERS_NOT_AVAILABLE"
                else:
                    results[tp] = ("ELECTION_NOT_NEEDED" if replicas[0] == state.leader
                                   else "PREFERRED_LEADER_NOT_AVAILABLE")
                continue
            writes.append((tp[0], tp[1], PartitionState(decision.leader, state.leader_epoch + 1, decision.isr,
                                                        self.epoch, state.zk_version), decision.reason))
            results[tp] = None
        if writes:
            async with self._lock:
                await asyncio.to_thread(self._write_all, writes)
        return results

    async def _rebalance_loop(self) -> None:
        while True:
            await asyncio.sleep(self.imbalance_check_interval_s)
            view = self._view
            if view is None or not self.active:
                continue
            assignments = {(t, p): r for t, a in view.topics.items() for p, r in a.replicas.items()}
            preferred: set[tuple[str, int]] = set()
            for broker in view.brokers:
                if election.imbalanced(assignments, view.states, broker) > self.imbalance_ratio:
                    preferred |= {tp for tp, r in assignments.items() if r and r[0] == broker}
            if preferred:
                async with self._lock:
                    await self._reconcile(view, preferred)


def _registered_since(view: ClusterView, state: PartitionState) -> frozenset[int]:
    """The live brokers whose registration is newer than the state's last write (KIP-380's broker epoch,
    ZooKeeper's czxid, against the state znode's mzxid): restarted since, whether or not a view of ours
    ever lacked them, after an unclean shutdown (a clean one fsync'ed everything they held). Only brokers
    the state names matter (election.next_state)."""
    if state.zxid < 0:
        return frozenset()
    return frozenset(b for b in (state.leader, *state.isr) if (r := view.brokers.get(b)) is not None
                     and r.czxid > state.zxid and not r.clean_start)
