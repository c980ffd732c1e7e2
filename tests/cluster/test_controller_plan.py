"""The controller's reconciliation as a function of a cluster view (Controller.plan and
plan_reassignments): no ZooKeeper needed, every decision checked."""

from __future__ import annotations

import dataclasses
import uuid

from eoslog.cluster.controller import Controller
from eoslog.cluster.zk.layout import BrokerRegistration, ClusterView, PartitionState, TopicAssignment


def view(brokers, topics, states, configs=None) -> ClusterView:
    return ClusterView(brokers={b: BrokerRegistration.plaintext(b, "127.0.0.1", 9000 + b) for b in brokers},
                       controller_id=1, topics=topics, configs=configs or {}, states=states)


def controller() -> Controller:
    c = Controller(zk=None, broker_id=1)
    c.epoch = 7
    return c


TOPIC_ID = uuid.uuid4()


def test_new_partitions_get_states_with_the_controller_epoch():
    topics = {"t": TopicAssignment("t", TOPIC_ID, {0: (2, 3, 1), 1: (4, 5, 6)})}
    writes = controller().plan(view({1, 2, 3}, topics, {}))
    assert [(t, p, s.leader, s.leader_epoch, s.isr, s.controller_epoch, s.zk_version) for t, p, s, _ in writes] == [
        ("t", 0, 2, 0, (2, 3, 1), 7, -1)]  # partition 1 has no live replica: nothing yet


def test_dead_leader_is_replaced_with_an_epoch_bump_on_the_same_znode_version():
    topics = {"t": TopicAssignment("t", TOPIC_ID, {0: (1, 2, 3)})}
    states = {("t", 0): PartitionState(1, 4, (1, 2, 3), 6, zk_version=11)}
    (write,) = controller().plan(view({2, 3}, topics, states))
    _, _, state, reason = write
    assert (state.leader, state.leader_epoch, state.isr, state.zk_version) == (2, 5, (2, 3), 11)
    assert "clean election" in reason


def test_topic_level_unclean_setting_wins_over_the_broker_default():
    topics = {"t": TopicAssignment("t", TOPIC_ID, {0: (1, 2)})}
    states = {("t", 0): PartitionState(1, 4, (1,), 6, zk_version=2)}
    (write,) = controller().plan(view({2}, topics, states, {"t": {"unclean.leader.election.enable": "true"}}))
    assert (write[2].leader, write[2].isr) == (2, (2,))
    (offline,) = controller().plan(view({2}, topics, states))
    assert offline[2].leader == -1


def test_reassignment_finishes_only_when_the_target_is_in_sync():
    moving = TopicAssignment("t", TOPIC_ID, {0: (3, 2, 1)}, adding={0: (3,)}, removing={0: (1,)})
    not_yet = {("t", 0): PartitionState(1, 4, (1, 2), 6, zk_version=5)}
    assert controller().plan_reassignments(view({1, 2, 3}, {"t": moving}, not_yet)) == []
    in_sync = {("t", 0): PartitionState(1, 4, (1, 2, 3), 6, zk_version=6)}
    ((assignment, states),) = controller().plan_reassignments(view({1, 2, 3}, {"t": moving}, in_sync))
    assert assignment.replicas == {0: (3, 2)} and assignment.adding == {} and assignment.removing == {}
    ((index, state),) = states
    # The old leader is being removed: leadership moves to the target's first in-sync replica (its
    # preferred leader), the ISR drops broker 1.
    assert (index, state.leader, state.leader_epoch, state.isr, state.zk_version) == (0, 3, 5, (2, 3), 6)


def test_reassignment_keeps_a_leader_that_stays():
    moving = TopicAssignment("t", TOPIC_ID, {0: (2, 3, 1)}, adding={0: (3,)}, removing={0: (1,)})
    states = {("t", 0): PartitionState(2, 1, (2, 1, 3), 6, zk_version=3)}
    ((_, ((_, state),)),) = controller().plan_reassignments(view({1, 2, 3}, {"t": moving}, states))
    assert (state.leader, state.isr) == (2, (2, 3))


# ---- restarts the controller did not see (issue 38): registrations newer than the state --------------

def registered(brokers: dict[int, int], topics, states, configs=None) -> ClusterView:
    """A view whose brokers registered at the given zxids (ZooKeeper's czxid)."""
    return ClusterView(brokers={b: dataclasses.replace(BrokerRegistration.plaintext(b, "127.0.0.1", 9000 + b),
                                                       czxid=z) for b, z in brokers.items()},
                       controller_id=1, topics=topics, configs=configs or {}, states=states)


def test_a_leader_registered_after_its_state_was_written_is_replaced():
    topics = {"t": TopicAssignment("t", TOPIC_ID, {0: (1, 2, 3)})}
    states = {("t", 0): PartitionState(1, 4, (1, 2, 3), 6, zk_version=11, zxid=500)}
    (write,) = controller().plan(registered({1: 900, 2: 100, 3: 100}, topics, states))
    _, _, state, reason = write
    assert (state.leader, state.leader_epoch, state.isr, state.zk_version) == (2, 5, (2, 3), 11)
    assert "registered again" in reason
    # Registered before the state was written (the controller saw the restart), or zxids unknown: fine.
    assert controller().plan(registered({1: 400, 2: 100, 3: 100}, topics, states)) == []
    unknown = {("t", 0): PartitionState(1, 4, (1, 2, 3), 6, zk_version=11)}
    assert controller().plan(registered({1: 900, 2: 100, 3: 100}, topics, unknown)) == []
    # Started after a clean shutdown (every byte fsync'ed): what it held is still there, so it stays.
    clean = registered({1: 900, 2: 100, 3: 100}, topics, states)
    clean.brokers[1] = dataclasses.replace(clean.brokers[1], clean_start=True)
    assert controller().plan(clean) == []


def test_a_registration_says_whether_the_broker_started_clean():
    for clean in (True, False):
        registration = dataclasses.replace(BrokerRegistration.plaintext(1, "h", 1), clean_start=clean)
        assert BrokerRegistration.decode(1, registration.encode(), 7).clean_start is clean
    # Kafka's registrations (and older eoslog's) do not say: read as not clean, the cautious reading.
    kafka = b'{"version":5,"host":"h","port":1,"endpoints":["PLAINTEXT://h:1"],"jmx_port":-1,"timestamp":"1"}'
    assert BrokerRegistration.decode(1, kafka, 7).clean_start is False


def test_a_restarted_follower_leaves_the_isr():
    topics = {"t": TopicAssignment("t", TOPIC_ID, {0: (1, 2, 3)})}
    states = {("t", 0): PartitionState(1, 4, (1, 2, 3), 6, zk_version=11, zxid=500)}
    (write,) = controller().plan(registered({1: 100, 2: 100, 3: 900}, topics, states))
    assert (write[2].leader, write[2].leader_epoch, write[2].isr) == (1, 5, (1, 2))


def test_a_restarted_sole_isr_leader_goes_offline_then_leads_again_cleanly_in_a_new_epoch():
    topics = {"t": TopicAssignment("t", TOPIC_ID, {0: (1, 2)})}
    states = {("t", 0): PartitionState(1, 4, (1,), 6, zk_version=11, zxid=500)}
    unclean = {"t": {"unclean.leader.election.enable": "true"}}  # still never the out-of-sync replica
    (offline,) = controller().plan(registered({1: 900, 2: 100}, topics, states, unclean))
    assert (offline[2].leader, offline[2].leader_epoch, offline[2].isr) == (-1, 5, (1,))
    written = {("t", 0): dataclasses.replace(offline[2], zk_version=12, zxid=950)}
    (again,) = controller().plan(registered({1: 900, 2: 100}, topics, written, unclean))
    assert (again[2].leader, again[2].leader_epoch, again[2].isr) == (1, 6, (1,))
