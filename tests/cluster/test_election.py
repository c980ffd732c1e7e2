"""The controller's pure decisions (cluster/election.py): every rule of Kafka's ZooKeeper-mode election."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eoslog.cluster import election
from eoslog.cluster.election import ReplicaAssignmentError, assign_replicas
from eoslog.cluster.zk.layout import NO_LEADER, PartitionState


def state(leader, epoch, isr):
    return PartitionState(leader, epoch, tuple(isr), 1, 3)


class TestAssignment:
    def test_round_robin_spreads_leaders_and_replicas(self):
        assignment = assign_replicas({1: None, 2: None, 3: None}, 6, 3, start=0)
        assert set(assignment) == set(range(6))
        for replicas in assignment.values():
            assert len(set(replicas)) == 3
        leaders = Counter(r[0] for r in assignment.values())
        assert leaders == {1: 2, 2: 2, 3: 2}

    def test_too_few_brokers_is_refused(self):
        with pytest.raises(ReplicaAssignmentError, match="larger than the 2 live brokers"):
            assign_replicas({1: None, 2: None}, 1, 3)

    def test_racks_put_replicas_on_different_racks(self):
        racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
        assignment = assign_replicas(racks, 12, 3)
        for replicas in assignment.values():
            assert len({racks[r] for r in replicas}) == 3, replicas

    @given(st.integers(1, 7), st.integers(1, 40), st.data())
    def test_every_partition_gets_distinct_replicas(self, brokers, partitions, data):
        factor = data.draw(st.integers(1, brokers))
        start = data.draw(st.integers(0, 10))
        assignment = assign_replicas({b: None for b in range(brokers)}, partitions, factor, start=start)
        assert sorted(assignment) == list(range(partitions))
        for replicas in assignment.values():
            assert len(replicas) == factor and len(set(replicas)) == factor

    def test_manual_assignment_checks(self):
        assert election.check_manual_assignment([2, 1], [1, 2, 3]) == (2, 1)
        with pytest.raises(ReplicaAssignmentError, match="duplicate"):
            election.check_manual_assignment([1, 1], [1, 2])
        with pytest.raises(ReplicaAssignmentError, match="unknown brokers"):
            election.check_manual_assignment([1, 9], [1, 2])

    INCONSISTENT = ("The manual partition assignment includes a partition with 1 replica(s), but this is not "
                    "consistent with previous partitions, which have 2 replica(s).")

    @pytest.mark.parametrize(("manual", "first", "factor", "message"), [
        ({0: []}, 0, None, "The manual partition assignment includes an empty replica list."),
        ({0: [9, 7, 1]}, 0, None, "The manual partition assignment includes broker 7, but no such broker is registered."),
        ({0: [2, 1, 2]}, 0, None, "The manual partition assignment includes the broker 2 more than once."),
        ({0: [1, 2], 1: [1]}, 0, None, INCONSISTENT),
        ({3: [1]}, 3, 2, INCONSISTENT),
        ({0: [1], 2: [2]}, 0, None, "partitions should be a consecutive 0-based integer sequence"),
    ])
    def test_manual_assignments_are_refused_with_kafkas_words(self, manual, first, factor, message):
        with pytest.raises(ReplicaAssignmentError) as refused:
            election.check_manual_assignments(manual, [1, 2], first, factor)
        assert str(refused.value) == message

    def test_manual_assignments_keep_their_order_of_replicas(self):
        assert election.check_manual_assignments({0: [2, 1], 1: [1, 2]}, [1, 2]) == {0: (2, 1), 1: (1, 2)}
        assert election.check_manual_assignments({4: [2]}, [1, 2], 4, 1) == {4: (2,)}


class TestElection:
    def test_new_partition_takes_live_replicas(self):
        decision = election.initial_state((3, 1, 2), {1, 2})
        assert (decision.leader, decision.isr) == (1, (1, 2))
        assert election.initial_state((3,), {1}) is None

    def test_clean_election_picks_first_live_isr_member_in_assignment_order(self):
        decision = election.next_state((1, 2, 3), state(1, 4, [1, 3, 2]), {2, 3}, unclean=False)
        assert (decision.leader, decision.isr, decision.clean) == (2, (3, 2), True)

    def test_no_live_isr_member_leaves_partition_offline_keeping_its_isr(self):
        decision = election.next_state((1, 2, 3), state(1, 4, [1]), {2, 3}, unclean=False)
        assert (decision.leader, decision.isr) == (NO_LEADER, (1,))
        # and nothing more happens until an ISR member returns
        assert election.next_state((1, 2, 3), state(NO_LEADER, 5, [1]), {2, 3}, unclean=False) is None
        back = election.next_state((1, 2, 3), state(NO_LEADER, 5, [1]), {1, 2, 3}, unclean=False)
        assert (back.leader, back.isr) == (1, (1,))

    def test_unclean_election_takes_any_live_replica_alone(self):
        decision = election.next_state((1, 2, 3), state(1, 4, [1]), {3}, unclean=True)
        assert (decision.leader, decision.isr, decision.clean) == (3, (3,), False)

    def test_dead_followers_leave_the_isr(self):
        decision = election.next_state((1, 2, 3), state(1, 4, [1, 2, 3]), {1, 2}, unclean=False)
        assert (decision.leader, decision.isr) == (1, (1, 2))

    def test_healthy_partition_needs_nothing(self):
        assert election.next_state((1, 2, 3), state(2, 4, [2, 1, 3]), {1, 2, 3}, unclean=False) is None

    def test_preferred_leader(self):
        s = state(2, 4, [2, 1])
        assert election.elect_preferred((1, 2, 3), s, {1, 2, 3}).leader == 1
        assert election.elect_preferred((3, 2, 1), s, {1, 2, 3}) is None  # 3 is not in the ISR
        assert election.elect_preferred((2, 1), s, {1, 2}) is None  # already leads
        assert election.next_state((1, 2, 3), s, {1, 2, 3}, unclean=False, preferred=True).leader == 1

    def test_unclean_election_request_only_for_leaderless_partitions(self):
        assert election.elect_unclean((1, 2), state(1, 1, [1]), {1, 2}) is None
        assert election.elect_unclean((1, 2), state(1, 1, [1]), {2}).leader == 2

    def test_imbalance_ratio(self):
        assignments = {("t", 0): (1, 2), ("t", 1): (1, 2), ("t", 2): (2, 1)}
        states = {("t", 0): state(2, 1, [2, 1]), ("t", 1): state(1, 1, [1, 2]), ("t", 2): state(2, 1, [2, 1])}
        assert election.imbalanced(assignments, states, 1) == 0.5
        assert election.imbalanced(assignments, states, 2) == 0.0
